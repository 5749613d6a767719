"""``python -m tile.backends.rocm --pipeline ARCH``: print the pass pipeline the backend runs for ARCH.

One pass a line, in order, with what it needs, guarantees and invalidates (the list is
``PIPELINE`` in ``tile.backends.rocm._src.backend``, the same for every gfx target)::

    python -m tile.backends.rocm --pipeline gfx90a
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tile.backends.rocm", description="Print the pass pipeline for an arch."
    )
    parser.add_argument("--pipeline", metavar="ARCH", required=True, help="gfx90a, gfx942, ...")
    args = parser.parse_args(argv)

    from tile.ir.target import Target
    from tile.ir.transform import format_pipeline

    from ._src.backend import arch_of, pipeline
    from .arch import capabilities
    from .errors import RocmArchError

    target = Target(kind="hip", options=(("mcpu", args.pipeline),))
    try:
        arch = arch_of(target)
        capabilities(arch)  # a target tile has no table for is refused here, as at compile time
    except RocmArchError as exc:
        parser.error(str(exc).splitlines()[0])
    passes = pipeline(target)
    print(format_pipeline(passes, f"tile.backends.rocm pipeline for {arch}: {len(passes)} passes"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
