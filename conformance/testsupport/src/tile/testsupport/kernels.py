"""Test kernels that several packages' tests build alike (each backend's tests pass its own
block size). tile.lang is imported when a kernel is built, so tile-layout's tests, which use
this package too, never pull it in."""

from __future__ import annotations

from typing import Any


def block_tagging_kernel(gx: int, gy: int, panel: int, order: str, threads: int) -> Any:
    """A ``gx x gy`` grid under ``T.use_swizzle(panel, order)`` in which every block writes its
    own coordinate, ``Out[by, bx] = by * gx + bx``: a swizzle that dropped or repeated a block
    leaves the output different from ``arange(gx * gy).reshape(gy, gx)``."""
    import tile.lang.language as T

    @T.prim_func
    def tag(Out: T.Tensor((gy, gx), "int32")):  # type: ignore[no-untyped-def,valid-type]
        with T.Kernel(gx, gy, threads=threads) as (bx, by):
            T.use_swizzle(panel, order=order)
            for i in T.Parallel(1):
                Out[by, bx] = by * gx + bx + i * 0

    return tag
