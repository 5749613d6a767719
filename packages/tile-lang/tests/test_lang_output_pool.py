"""The CPU output pool: dropped large outputs are reused, never while anything still reaches them."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from _lang_kernels import row_scale

import tile.lang as tilelang
from tile.lang._src.output_pool import POOL, pooled_bytes

torch = pytest.importorskip("torch")
MIB = 1 << 20


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.delenv("TILE_OUTPUT_POOL_BYTES", raising=False)
    POOL.clear()
    yield
    POOL.clear()


def test_memory_comes_back_only_when_the_last_view_is_gone():
    block = pooled_bytes(2 * MIB)
    address = block.ctypes.data
    assert address % 64 == 0
    tail = block[MIB:].view(np.float32)  # a view that outlives the array it came from
    tensor = torch.from_numpy(block[:MIB])  # and a tensor over the first half
    del block
    gc.collect()
    assert POOL.count(2 * MIB) == 0
    other = pooled_bytes(2 * MIB)  # must not be the memory the views still reach
    assert other.ctypes.data != address
    tail[:] = 7.0
    tensor.fill_(1)
    assert float(tail.sum()) == 7.0 * MIB // 4 and int(tensor.sum()) == MIB
    del other
    POOL.clear()
    del tail, tensor
    gc.collect()
    assert POOL.count(2 * MIB) == 1
    assert pooled_bytes(2 * MIB).ctypes.data == address  # now it is reused


def test_sizes_limit_and_switch_off(monkeypatch):
    gc.collect()
    POOL.clear()
    for _ in range(3):  # three buffers of one size alive at once, then dropped: two are kept
        held = [pooled_bytes(MIB) for _ in range(3)]
        del held
    assert POOL.count(MIB) == 2 and POOL.held_bytes() == 2 * MIB
    POOL.clear()
    monkeypatch.setenv("TILE_OUTPUT_POOL_BYTES", str(3 * MIB))
    a, b = pooled_bytes(2 * MIB), pooled_bytes(2 * MIB)
    del a, b
    assert POOL.held_bytes() == 2 * MIB  # the second would pass the 3 MiB limit
    POOL.clear()
    monkeypatch.setenv("TILE_OUTPUT_POOL_BYTES", "0")
    c = pooled_bytes(MIB)
    del c
    assert POOL.held_bytes() == 0


def test_kernel_outputs_reuse_dropped_outputs_and_keep_their_values():
    n = 512  # 512 x 1024 fp32 = 2 MiB: a large output

    kernel = tilelang.compile(row_scale(n, 1024, 2.0, rows=32), out_idx=[-1], target="cpu")
    for make in (torch.ones, lambda *s: np.ones(s, np.float32)):
        first = kernel(make(n, 1024))
        kept = first[3]  # a row of the first output stays alive
        address = first.data_ptr() if isinstance(first, torch.Tensor) else first.ctypes.data
        del first
        second = kernel(make(n, 1024) * 3)
        second_address = second.data_ptr() if isinstance(second, torch.Tensor) else second.ctypes.data
        assert second_address != address  # the row still reaches the first output's memory
        assert float(kept.sum()) == 2 * 1024 and float(second.sum()) == 6 * n * 1024
        del kept, second
        gc.collect()
        third = kernel(make(n, 1024))
        third_address = third.data_ptr() if isinstance(third, torch.Tensor) else third.ctypes.data
        assert third_address in (address, second_address)  # recycled
        assert float(third.sum()) == 2 * n * 1024
        del third
        POOL.clear()
