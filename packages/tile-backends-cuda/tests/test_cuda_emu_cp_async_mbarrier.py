"""A producer warpgroup filling shared memory with ``T.ptx_cp_async`` and handing each stage
over with ``T.cp_async_barrier_noinc`` (the shape of TileLang's warp-specialized MLA decoder,
examples/deepseek_mla/example_mla_decode_ws.py), on the CPU emulator (TILE_DEVICE=emu).

Two things made that decoder's output all NaN: TileLang counts ``T.ptx_cp_async``'s last
argument in elements (8 float16 are 16 bytes) where tile read bytes, so half of every row was
never copied; and the producer commits no group, so a ``cp.async.wait_group 0`` before the
arrival waited for nothing and the stage's bytes never landed (PTX's
``cp.async.mbarrier.arrive.noinc`` tracks every earlier copy of the thread, committed or not).
Results are compared with numpy; the poisoned shared memory of the emulator turns a byte that
never landed into a NaN.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]

ROWS, COLS, TILES, STAGES = 16, 64, 4, 2
SM90A = {"kind": "cuda", "arch": "sm_90a"}


def _stream(valid_rows: int) -> object:
    """B = A + 1 over TILES tiles of ROWS x COLS float16, each tile copied to a shared stage by
    warpgroup 1 (one 16-byte cp.async per thread, rows from ``valid_rows`` on zero-filled by
    the predicate) and read by warpgroup 0 once the stage's mbarrier phase completes."""

    @T.prim_func
    def stream(A: T.Tensor((TILES * ROWS, COLS), "float16"), B: T.Tensor((TILES * ROWS, COLS), "float16")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((STAGES, ROWS, COLS), "float16")
            ready = T.alloc_barrier(arrive_count=[128] * STAGES)
            free = T.alloc_barrier(arrive_count=[128] * STAGES)
            tx = T.get_thread_binding()
            if tx < 128:
                for t in T.serial(TILES // STAGES):
                    for stage in T.unroll(STAGES):
                        T.barrier_wait(ready[stage], t & 1)
                        for e in T.serial(ROWS * COLS // 128):
                            r = (tx * (ROWS * COLS // 128) + e) // COLS
                            c = (tx * (ROWS * COLS // 128) + e) % COLS
                            B[(t * STAGES + stage) * ROWS + r, c] = S[stage, r, c] + T.float16(1)
                        T.barrier_arrive(free[stage])
            else:
                for t in T.serial(TILES // STAGES):
                    for stage in T.unroll(STAGES):
                        T.barrier_wait(free[stage], (t & 1) ^ 1)
                        row = (t * STAGES + stage) * ROWS + (tx - 128) // 8
                        T.ptx_cp_async(
                            T.access_ptr(S[stage, (tx - 128) // 8, (tx - 128) % 8 * 8], "w", 8),
                            T.access_ptr(A[row, (tx - 128) % 8 * 8], "r", 8),
                            8,
                            predicate=row % ROWS < valid_rows,
                        )
                        T.cp_async_barrier_noinc(ready[stage])

    return stream


@pytest.mark.parametrize("valid_rows", [ROWS, 11])
def test_cp_async_stages_handed_over_by_noinc_arrivals(monkeypatch, valid_rows):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_stream(valid_rows), out_idx=[-1], target=SM90A)
    source = kernel.get_kernel_source()
    assert "tile_cp_async_zfill_16" in source  # 8 float16 elements: one 16-byte copy
    a = np.random.default_rng(7).standard_normal((TILES * ROWS, COLS)).astype("float16")
    expected = a.copy()
    expected.reshape(TILES, ROWS, COLS)[:, valid_rows:, :] = 0
    np.testing.assert_array_equal(kernel(a), expected + np.float16(1))
