"""Print the pass-rate tables of one or more ``run_tilelang.py`` result files (Markdown).

    python tools/compat/rates.py run1.json run2.json ...   # a later file's run of a program wins

The same tables ``report.py --results`` puts in docs/compat.md, for a section written by hand
(the examples runs there are measured in several passes).
"""

from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import pass_rates  # noqa: E402


def main(argv: list[str]) -> int:
    by_path: dict[str, dict[str, object]] = {}
    for name in argv:
        by_path.update({str(e["path"]): e for e in json.loads(pathlib.Path(name).read_text())})
    rows, reasons = pass_rates(list(by_path.values()))
    print("\n".join([*rows, "", *reasons]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
