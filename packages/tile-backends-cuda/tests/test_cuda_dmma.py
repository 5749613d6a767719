"""float64 ``T.gemm`` on CUDA tensor cores: DMMA (``mma.sync.m8n8k4`` f64, sm_80+).

Two m8n8k4 instructions make one m16n8k4 step into the usual m16n8 accumulator registers
(``tile_mma_m16n8k4_f64``; its SASS is checked in test_cuda_header_sass.py). Each kernel
runs on the CUDA emulator against numpy's float64 product.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]


def gemm_f64(M: int, N: int, K: int, block_k: int, transpose_b: bool) -> Any:
    b_shape = (N, K) if transpose_b else (K, N)
    b_tile = (N, block_k) if transpose_b else (block_k, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float64"), B: T.Tensor(b_shape, "float64"), C: T.Tensor((M, N), "float64")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, block_k), "float64")
            B_s = T.alloc_shared(b_tile, "float64")
            C_l = T.alloc_fragment((M, N), "float64")
            T.clear(C_l)
            for k in T.Pipelined(K // block_k, num_stages=2):
                T.copy(A[0, k * block_k], A_s)
                if transpose_b:
                    T.copy(B[0, k * block_k], B_s)
                else:
                    T.copy(B[k * block_k, 0], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=transpose_b)
            T.copy(C_l, C)

    return main


@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_float64_gemm_uses_dmma_and_matches_numpy(transpose_b: bool) -> None:
    M, N, K = 32, 64, 48
    kernel = tilelang.compile(
        gemm_f64(M, N, K, 16, transpose_b), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}
    )
    assert "tile_mma_m16n8k4_f64" in kernel.get_kernel_source()
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K))
    b = rng.standard_normal((N, K) if transpose_b else (K, N))
    expected = a @ (b.T if transpose_b else b)
    np.testing.assert_allclose(kernel(a, b), expected, rtol=1e-12, atol=1e-12)
