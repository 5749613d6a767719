"""``python -m tile.backends.cuda --pipeline ARCH``: print the pass pipeline the backend runs for ARCH.

One pass a line, in order, with what it needs, guarantees and invalidates (the lists are
``SM80_PIPELINE`` and ``SM90A_PIPELINE`` in ``tile.backends.cuda._src.backend``)::

    python -m tile.backends.cuda --pipeline sm_90a
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tile.backends.cuda", description="Print the pass pipeline for an arch."
    )
    parser.add_argument("--pipeline", metavar="ARCH", required=True, help="sm_80 ... sm_90a")
    args = parser.parse_args(argv)

    from tile.ir.transform import format_pipeline

    from ._src.backend import PIPELINES, arch_family
    from .arch import capabilities, parse_arch
    from .errors import CudaArchError

    try:
        arch = parse_arch(args.pipeline).name
        capabilities(arch)  # an arch tile has no table for is refused here, as at compile time
    except CudaArchError as exc:
        parser.error(str(exc).splitlines()[0])
    family = arch_family(arch)
    passes = PIPELINES[family]
    title = f"tile.backends.cuda pipeline for {arch} ({family} family): {len(passes)} passes"
    print(format_pipeline(passes, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
