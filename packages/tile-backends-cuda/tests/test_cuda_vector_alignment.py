"""Vector accesses in generated CUDA are aligned to their width, or not made.

A ``float4`` store to an address that is not a multiple of 16 bytes faults on a GPU
("misaligned address"); the emulator runs it fine, so this is checked in the source.
A one-thread ``T.Parallel`` over four consecutive columns is one vector access when its
start is provably aligned to 16 bytes, two ``float2`` accesses when it is aligned to 8
only (row 66), and four scalar ones when it is not aligned at all (row 66, column + 1).
"""

from __future__ import annotations

import re

import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_nvcc

pytestmark = needs_nvcc


def row_scale(row: int, shift: int):  # type: ignore[no-untyped-def]
    @T.prim_func
    def scale(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, row), "float32")):
        with T.Kernel(64, threads=1) as bx:
            for j in T.Parallel(4):
                B[bx, j + shift] = A[bx, j] * 2

    return scale


@pytest.mark.parametrize(("row", "shift", "width"), [(64, 0, 4), (68, 4, 4), (66, 0, 2), (66, 1, 1)])
def test_vector_store_only_where_aligned(row: int, shift: int, width: int) -> None:
    kernel = tilelang.compile(row_scale(row, shift), target={"kind": "cuda", "arch": "sm_80"})
    source = kernel.get_kernel_source()
    stores = set(re.findall(r"\*\(float(\d)\*\)\(B_ptr", source))
    assert stores == ({str(width)} if width > 1 else set()), source
    assert re.search(r"B_ptr\[", source) if width == 1 else True, source
