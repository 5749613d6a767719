"""``python -m tile.backends.rocm --pipeline ARCH``: print the pass pipeline the backend runs for ARCH.

One pass a line, in order, with what it needs, guarantees and invalidates (the list is
``PIPELINE`` in ``tile.backends.rocm._src.backend``, the same for every gfx target)::

    python -m tile.backends.rocm --pipeline gfx90a

``--toolchain``: for every supported arch, the compiler that would build its code objects here
(``toolchain.select_hip_compiler``), or why none can.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tile.backends.rocm", description="Print the pass pipeline for an arch."
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--pipeline", metavar="ARCH", help="gfx90a, gfx942, ...")
    what.add_argument("--toolchain", action="store_true", help="the compiler each supported arch gets here")
    args = parser.parse_args(argv)
    if args.toolchain:
        return _toolchain()

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


def _toolchain() -> int:
    """One line per supported arch: the compiler that builds it, or the reason none does."""
    from tile.layout.errors import TileError

    from .arch import SUPPORTED_ARCHS
    from .toolchain import select_hip_compiler

    status = 0
    for arch in SUPPORTED_ARCHS:
        try:
            print(f"{arch}: {select_hip_compiler(arch).describe()}")
        except TileError as exc:
            print(f"{arch}: none. {exc}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
