"""tile.ops.norm (row softmax, RMSNorm) against numpy, including tails and fp16."""

import numpy as np
import pytest

from tile.ops.norm import rms_norm, softmax


def _softmax_ref(x):
    x = x.astype("float64")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _rms_norm_ref(x, w, eps):
    x = x.astype("float64")
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w.astype("float64")


@pytest.mark.parametrize(
    "shape,dtype,tol",
    [
        ((37, 100), "float32", 1e-6),
        ((16, 64), "float32", 1e-6),
        ((5, 257), "float16", 1e-3),
        ((1, 1), "float32", 0),
    ],
)
def test_softmax_matches_numpy(shape, dtype, tol):
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype(dtype)
    y = softmax(x, target="cpu")
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_allclose(y.astype("float64"), _softmax_ref(x), rtol=tol, atol=tol)


def test_softmax_is_shift_invariant_for_large_values():
    # Without the max subtraction exp(1000) overflows to inf and the result is nan.
    x = np.random.default_rng(1).standard_normal((19, 33)).astype("float32") + 1000
    np.testing.assert_allclose(softmax(x, target="cpu"), _softmax_ref(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape,dtype,tol", [((37, 100), "float32", 1e-5), ((3, 129), "float16", 2e-3)])
def test_rms_norm_matches_numpy(shape, dtype, tol):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    y = rms_norm(x, w, eps=1e-5, target="cpu")
    np.testing.assert_allclose(y.astype("float64"), _rms_norm_ref(x, w, 1e-5), rtol=tol, atol=tol)


def test_rms_norm_rejects_wrong_weight_shape():
    with pytest.raises(ValueError, match="weight"):
        rms_norm(np.zeros((4, 8), "float32"), np.zeros(7, "float32"))
