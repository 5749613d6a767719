"""numpy references and dtype-aware tolerances."""

from __future__ import annotations

import numpy as np

# (rtol, atol) by the *lowest-precision* dtype that touches the value.
_TOLERANCE = {
    "float64": (1e-12, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}


def tolerance(*dtypes: str) -> tuple[float, float]:
    """The (rtol, atol) for a result computed through ``dtypes`` (exact for integers)."""
    worst = (0.0, 0.0)
    for dtype in dtypes:
        tol = _TOLERANCE.get(dtype, (0.0, 0.0))
        worst = (max(worst[0], tol[0]), max(worst[1], tol[1]))
    return worst


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values that are exact in ``dtype``: small integers for ints, [-2, 2) floats otherwise."""
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -50), min(info.max, 50)
        return rng.integers(lo, hi + 1, size=shape).astype(dtype)
    return (rng.random(shape, dtype=np.float64) * 4 - 2).astype(dtype)


def assert_close(actual: np.ndarray, expected: np.ndarray, *dtypes: str) -> None:
    """Compare against a float64 (or exact integer) reference with dtype-aware tolerance."""
    rtol, atol = tolerance(*dtypes)
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)
