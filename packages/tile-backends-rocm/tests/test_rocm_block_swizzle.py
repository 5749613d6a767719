"""``T.use_swizzle`` on ROCm: the HIP kernel binds a permuted block index, results unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

TARGET = {"kind": "hip", "mcpu": "gfx90a"}


def tagging_kernel(gx: int, gy: int, panel: int, order: str):
    @T.prim_func
    def tag(Out: T.Tensor((gy, gx), "int32")):
        with T.Kernel(gx, gy, threads=64) as (bx, by):
            T.use_swizzle(panel, order=order)
            for i in T.Parallel(1):
                Out[by, bx] = by * gx + bx + i * 0

    return tag


@needs_host_cxx
@pytest.mark.parametrize("order", ["row", "col"])
def test_every_block_writes_its_own_coordinate_once(monkeypatch, order):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(tagging_kernel(3, 5, 2, order), out_idx=[-1], target=TARGET)
    assert "bx_swizzled" in kernel.get_kernel_source("hip")
    # a permutation that dropped or repeated a block would leave a slot unwritten or wrong
    np.testing.assert_array_equal(np.asarray(kernel()), np.arange(15, dtype=np.int32).reshape(5, 3))
