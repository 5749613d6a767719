"""sm_90a: a pipelined loop whose tiles start at an offset read from memory keeps cp.async.

TileLang's grouped GEMM reads each block's first row from a table (``m_start = ... +
batch_offsets[cur_batch_idx]``). The producer warpgroup of warp specialization recomputes the
TMA tiles' corners on its own threads, which it cannot do for a value loaded from memory; the
loop was marked for TMA anyway and the compile stopped later with an internal
``TmaUnsupported: the producer loop reads a scalar that loads from memory``. Such a loop now
stays a cp.async pipeline, checked on the emulator against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

pytestmark = needs_host_cxx


def grouped_gemm(total: int, groups: int, k: int, n: int, bm: int = 64, bn: int = 64, bk: int = 32):
    @T.prim_func
    def main(
        A: T.Tensor((total, k), "float16"),
        B: T.Tensor((groups, k, n), "float16"),
        starts: T.Tensor((groups,), "int32"),
        C: T.Tensor((total, n), "float16"),
    ):
        with T.Kernel(groups, T.ceildiv(n, bn), threads=128) as (g, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            m_start = starts[g]
            T.clear(acc)
            for kk in T.Pipelined(T.ceildiv(k, bk), num_stages=2):
                T.copy(A[m_start, kk * bk], A_s)
                T.copy(B[g, kk * bk, by * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[m_start, by * bn])

    return main


def test_a_table_read_tile_corner_compiles_and_multiplies(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    groups, k, n, bm = 3, 64, 64, 64
    total = groups * bm
    kernel = tilelang.compile(grouped_gemm(total, groups, k, n), target={"kind": "cuda", "arch": "sm_90a"})
    source = kernel.get_kernel_source()
    assert "cp.async" in source or "cp_async" in source
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (total, k)).astype("float16")
    b = rng.integers(-3, 4, (groups, k, n)).astype("float16")
    starts = np.array([128, 0, 64], "int32")  # the groups' rows, out of order
    c = np.zeros((total, n), "float16")
    kernel(a, b, starts, c)
    want = np.zeros((total, n), "float32")
    for g, s in enumerate(starts):
        want[s : s + bm] = a[s : s + bm].astype("float32") @ b[g].astype("float32")
    np.testing.assert_array_equal(c.astype("float32"), want)


@pytest.mark.parametrize("table", [False, True])
def test_the_warp_specialized_path_still_takes_block_index_corners(monkeypatch, table):
    # the same loop with corners from the block index alone keeps its TMA producer warps
    monkeypatch.setenv("TILE_DEVICE", "emu")
    total, k, n, bm, bk = 128, 64, 64, 64, 32

    @T.prim_func
    def plain(
        A: T.Tensor((total, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((total, n), "float16")
    ):
        with T.Kernel(total // bm, threads=128) as bx:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, n), "float16")
            acc = T.alloc_fragment((bm, n), "float32")
            T.clear(acc)
            for kk in T.Pipelined(k // bk, num_stages=2):
                T.copy(A[bx * bm, kk * bk], A_s)
                T.copy(B[kk * bk, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[bx * bm, 0])

    func = grouped_gemm(total, 2, k, n) if table else plain
    source = tilelang.compile(func, target={"kind": "cuda", "arch": "sm_90a"}).get_kernel_source()
    assert ("tma" in source.lower()) != table
