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


def _norm_grads_ref(dy, x, w, layer):
    """dx, dw (and db) of RMSNorm / LayerNorm over the last axis, in float64 numpy."""
    dy, x, w = (a.astype("float64") for a in (dy, x, w))
    n = x.shape[1]
    mean = x.mean(1, keepdims=True) if layer else 0.0
    r = 1 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    xhat = (x - mean) * r
    g = dy * w
    centre = g.sum(1, keepdims=True) / n if layer else 0.0
    dx = r * (g - centre - xhat * (g * xhat).sum(1, keepdims=True) / n)
    return dx, (dy * xhat).sum(0), dy.sum(0)


@pytest.mark.parametrize("layer", [False, True])
@pytest.mark.parametrize("rows", [1, 8, 37, 64])
def test_norm_backward_kernels_stream_rows_with_a_tail(layer, rows):
    # 37 rows in blocks of `rows`: a ragged last block (8), one block (37), a block past M (64).
    from tile.ops._src import norms, run
    from tile.ops._src.configs import Tiling
    from tile.ops._src.runtime import compiled

    rng = np.random.default_rng(7)
    x, dy = rng.standard_normal((2, 37, 100)).astype("float32")
    w, b = rng.standard_normal((2, 100)).astype("float32")
    if layer:
        _, mean, rstd = run.layer_norm_forward(x, w, b, 1e-5, "cpu")
        kernel = compiled(norms.layer_norm_bwd_kernel, (-3, -2, -1), "cpu", 37, 100, "float32", "float32",
                          Tiling(block_M=rows))
        dx, dw, db = kernel(dy, x, w, mean, rstd)
        db = db.sum(0)
    else:
        _, rstd = run.rms_norm_forward(x, w, 1e-5, "cpu")
        kernel = compiled(norms.rms_norm_bwd_kernel, (-2, -1), "cpu", 37, 100, "float32", "float32",
                          Tiling(block_M=rows))
        dx, dw = kernel(dy, x, w, rstd)
    assert dw.shape == (-(-37 // rows), 100)
    want_dx, want_dw, want_db = _norm_grads_ref(dy, x, w, layer)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw.sum(0), want_dw, rtol=1e-4, atol=1e-4)
    if layer:
        np.testing.assert_allclose(db, want_db, rtol=1e-4, atol=1e-4)
