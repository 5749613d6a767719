"""read_in_place: a gemm operand used once (M == 1) is read from global memory, not staged."""

import numpy as np
import pytest
from _cpu_gemm_support import k_loop_gemm

import tile.lang as tilelang
import tile.lang.language as T


def vector_matrix(N, K, block_N, block_K, reuse_stage=False):
    """The GPU-style GEMV: x and W tiles staged in shared memory, one T.gemm per K tile."""

    @T.prim_func
    def main(x: T.Tensor((1, K), "float32"), W: T.Tensor((K, N), "float32"), y: T.Tensor((1, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x_s = T.alloc_shared((1, block_K), "float32")
            W_s = T.alloc_shared((block_K, block_N), "float32")
            y_f = T.alloc_fragment((1, block_N), "float32")
            T.clear(y_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(x[0, k * block_K], x_s)
                T.copy(W[k * block_K, bx * block_N], W_s)
                if reuse_stage:
                    for i, j in T.Parallel(block_K, block_N):
                        W_s[i, j] = W_s[i, j] * 2.0
                T.gemm(x_s, W_s, y_f)
            T.copy(y_f, y[0, bx * block_N])

    return main


def _run(N, K, block_N, block_K, reuse_stage=False):
    rng = np.random.default_rng(N * 7 + K)
    x = rng.uniform(-1, 1, (1, K)).astype(np.float32)
    w = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    kern = tilelang.compile(vector_matrix(N, K, block_N, block_K, reuse_stage), out_idx=[-1], target="cpu")
    expected = x.astype(np.float64) @ w.astype(np.float64) * (2.0 if reuse_stage else 1.0)
    np.testing.assert_allclose(kern(x, w), expected, rtol=1e-5, atol=1e-5 * K)
    return kern.artifact.sources["tir"]


def test_single_use_operand_is_read_in_place():
    tir = _run(256, 96, 128, 32)
    assert "W_s[" not in tir  # no staging stores or loads left
    assert "W[" in tir


@pytest.mark.parametrize("N,K", [(200, 96), (256, 90)])
def test_tail_tiles_keep_the_guarded_copy(N, K):
    # The last N or K tile reaches past W: only the copy's guards make it read zeros.
    assert "W_s[" in _run(N, K, 128, 32)


def test_operand_touched_elsewhere_keeps_the_copy():
    assert "W_s[" in _run(128, 64, 64, 32, reuse_stage=True)


def test_reused_operand_keeps_the_copy():
    # M > 1: every element of B_s feeds M rows, so staging pays off and stays.
    mm = k_loop_gemm(4, 32, 64, 4, 32, 32, dtype="float32", num_stages=1)
    kern = tilelang.compile(mm, out_idx=[-1], target="cpu")
    a = np.arange(4 * 64, dtype=np.float32).reshape(4, 64) / 100
    b = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
    np.testing.assert_allclose(kern(a, b), a @ b, rtol=1e-5)
    assert "B_s[" in kern.artifact.sources["tir"]
