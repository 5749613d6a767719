"""Forms TileLang's convolution example writes: ``KH, KW = K, K`` before ``T.Kernel`` in an
eager kernel (other names for a ``T.const`` dim), and ``T.Tensor(shape, dtype, X.data)``
in a kernel body (the same memory seen with another shape, here a 3-D weight as a matrix
that a pipelined loop copies tile by tile). Checked against numpy on the CPU and the CUDA
emulator (sm_90a considers such copies for TMA: a view is not a parameter, so they stay
cp.async)."""

from __future__ import annotations

import numpy as np
import pytest
from _lang_kernels import EMU_TARGETS

import tile.lang as tilelang
import tile.lang.language as T


def test_parallel_assignment_names_a_const_dim_twice():
    torch = pytest.importorskip("torch")

    @tilelang.jit(target="cpu")
    def tiled(A, scale):
        N, K = T.const("N, K")
        KH, KW = K, K
        A: T.Tensor((N, KH), "float32")
        out = T.empty((N, KW * 2), "float32")
        with T.Kernel(N, threads=1) as bx:
            for j in T.serial(KW * 2):
                out[bx, j] = A[bx, j % KH] * scale
        return out

    a = torch.randn(4, 3)
    np.testing.assert_allclose(tiled(a, 2.0).numpy(), np.tile(a.numpy(), (1, 2)) * 2.0, rtol=1e-6)


def flattened_weight_gemm(taps, channels, filters, rows):
    block_k = 32

    @T.prim_func
    def kernel(
        X: T.Tensor((rows, taps * channels), "float16"),
        W: T.Tensor((taps, channels, filters), "float16"),
        Out: T.Tensor((rows, filters), "float32"),
    ):
        with T.Kernel(1, threads=128):
            x_tile = T.alloc_shared((rows, block_k), "float16")
            w_tile = T.alloc_shared((block_k, filters), "float16")
            acc = T.alloc_fragment((rows, filters), "float32")
            w_flat = T.Tensor((taps * channels, filters), "float16", W.data)
            T.clear(acc)
            for k in T.Pipelined(taps * channels // block_k, num_stages=2):
                T.copy(X[0, k * block_k], x_tile)
                T.copy(w_flat[k * block_k, 0], w_tile)
                T.gemm(x_tile, w_tile, acc)
            T.copy(acc, Out)

    return kernel


@pytest.mark.parametrize("target", EMU_TARGETS)
def test_a_view_of_a_parameter_feeds_a_pipelined_gemm(monkeypatch, target):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    torch = pytest.importorskip("torch")
    taps, channels, filters, rows = 4, 32, 32, 32
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, taps * channels)).astype(np.float16)
    w = rng.standard_normal((taps, channels, filters)).astype(np.float16)
    program = flattened_weight_gemm(taps, channels, filters, rows)
    kernel = tilelang.compile(program, out_idx=[-1], target=target)
    out = kernel(torch.from_numpy(x), torch.from_numpy(w))
    expected = x.astype(np.float32) @ w.reshape(taps * channels, filters).astype(np.float32)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-2, atol=5e-2)
