"""``T.use_swizzle`` on ROCm: the HIP kernel binds a permuted block index, results unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
from tile.testsupport.kernels import block_tagging_kernel
from tile.testsupport.markers import needs_host_cxx

TARGET = {"kind": "hip", "mcpu": "gfx90a"}


@needs_host_cxx
@pytest.mark.parametrize("order", ["row", "col"])
def test_every_block_writes_its_own_coordinate_once(monkeypatch, order):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(block_tagging_kernel(3, 5, 2, order, threads=64), out_idx=[-1], target=TARGET)
    assert "bx_swizzled" in kernel.get_kernel_source("hip")
    # a permutation that dropped or repeated a block would leave a slot unwritten or wrong
    np.testing.assert_array_equal(np.asarray(kernel()), np.arange(15, dtype=np.int32).reshape(5, 3))
