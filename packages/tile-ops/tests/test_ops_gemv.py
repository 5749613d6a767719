"""tile.ops.gemv: ``y = x @ W`` against numpy, including sizes that are not block multiples."""

import numpy as np
import pytest

import tile.lang as tilelang
from tile.ops.gemv import gemv, gemv_kernel


@pytest.mark.parametrize(
    "N,K,block_N,block_K",
    [(512, 256, 128, 32), (100, 70, 64, 16), (1, 5, 64, 16), (300, 1, 128, 32)],
)
def test_gemv_matches_numpy(N, K, block_N, block_K):
    rng = np.random.default_rng(N + K)
    x = rng.uniform(-1, 1, (1, K)).astype(np.float32)
    w = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    kern = tilelang.compile(gemv_kernel(N, K, block_N=block_N, block_K=block_K), out_idx=[-1], target="cpu")
    y = kern(x, w)
    assert y.shape == (1, N)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-5 * K)


def test_gemv_half_inputs_accumulate_in_float32():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (1, 96)).astype(np.float16)
    w = rng.uniform(-1, 1, (96, 80)).astype(np.float16)
    func = gemv_kernel(80, 96, dtype="float16", block_N=64, block_K=32)
    kern = tilelang.compile(func, out_idx=[-1], target="cpu")
    ref = x.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(kern(x, w).astype(np.float64), ref, rtol=2e-3, atol=2e-3)


def test_gemv_wrapper_checks_shapes():
    x = np.ones((1, 5), np.float32)
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(gemv(x, w, target="cpu"), [[30.0, 35.0, 40.0]])
    with pytest.raises(ValueError, match="gemv computes"):
        gemv(np.ones((2, 5), np.float32), w, target="cpu")
