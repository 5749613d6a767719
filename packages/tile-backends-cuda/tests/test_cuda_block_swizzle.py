"""``T.use_swizzle`` on CUDA: the block index is permuted into panels, results unchanged.

The permutation is checked against an order written out by hand and for being a
bijection on ragged grids; a kernel that records which block each launch position
became, and a swizzled GEMM, run under the CPU emulator against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda import probe_nvcc
from tile.ir.transform.rasterize_blocks import permuted
from tile.testsupport.kernels import block_tagging_kernel
from tile.testsupport.markers import needs_host_cxx

SM80 = {"kind": "cuda", "arch": "sm_80"}
needs_nvcc = pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
needs_cxx = needs_host_cxx


def test_row_panels_of_two_by_hand():
    # grid 3 x 4 (gx=3, gy=4), panels of 2 rows: launch order 0..11 visits
    # (0,0) (0,1) (1,0) (1,1) (2,0) (2,1) | (0,2) (0,3) (1,2) (1,3) (2,2) (2,3)
    order = [permuted(lin % 3, lin // 3, 3, 4, 2, "row") for lin in range(12)]
    first = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert order == first + [(x, y + 2) for x, y in first]


@pytest.mark.parametrize("order", ["row", "col"])
@pytest.mark.parametrize(("gx", "gy", "panel"), [(3, 4, 2), (5, 7, 3), (8, 2, 4), (1, 9, 4), (6, 5, 10)])
def test_every_block_once(gx, gy, panel, order):
    seen = [permuted(x, y, gx, gy, panel, order) for y in range(gy) for x in range(gx)]
    assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]


def tagging_kernel(gx, gy, panel, order):
    return block_tagging_kernel(gx, gy, panel, order, threads=32)


@needs_nvcc
def test_source_binds_the_permuted_index():
    kernel = tilelang.compile(tagging_kernel(3, 5, 2, "row"), target=SM80)
    source = kernel.get_kernel_source()  # the CUDA source by default, as in TileLang
    assert "__global__" in source
    assert "bx_swizzled" in source and "by_swizzled" in source


@needs_nvcc
@needs_cxx
@pytest.mark.parametrize("order", ["row", "col"])
def test_swizzled_kernels_run_under_emulation(monkeypatch, order):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    # every block writes its own coordinate: the output is the same as without swizzling
    out = tilelang.compile(tagging_kernel(3, 5, 2, order), out_idx=[-1], target=SM80)()
    np.testing.assert_array_equal(np.asarray(out), np.arange(15, dtype=np.int32).reshape(5, 3))

    m, n, k, bm, bn = 96, 160, 64, 32, 32

    @T.prim_func
    def gemm(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=128) as (bx, by):
            T.use_swizzle(2, order=order)
            A_s = T.alloc_shared((bm, 32), "float16")
            B_s = T.alloc_shared((32, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for kk in T.Pipelined(k // 32, num_stages=2):
                T.copy(A[by * bm, kk * 32], A_s)
                T.copy(B[kk * 32, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((k, n)).astype("float16")
    c = tilelang.compile(gemm, out_idx=[-1], target=SM80)(a, b)
    np.testing.assert_allclose(np.asarray(c), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)
