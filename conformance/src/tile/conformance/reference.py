"""numpy references and dtype-aware tolerances."""

from __future__ import annotations

import numpy as np

# (rtol, atol) by the *lowest-precision* dtype that touches the value.
_TOLERANCE = {
    "float64": (1e-12, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype of a tile type name; bfloat16 and fp8 come from ml_dtypes."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def tolerance(*dtypes: str) -> tuple[float, float]:
    """The (rtol, atol) for a result computed through ``dtypes`` (exact for integers)."""
    worst = (0.0, 0.0)
    for dtype in dtypes:
        tol = _TOLERANCE.get(dtype, (0.0, 0.0))
        worst = (max(worst[0], tol[0]), max(worst[1], tol[1]))
    return worst


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values that are exact in ``dtype``: small integers for ints, [-2, 2) floats otherwise."""
    np_type = np_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        lo, hi = max(int(info.min), -50), min(int(info.max), 50)
        return rng.integers(lo, hi + 1, size=shape).astype(np_type)
    return (rng.random(shape, dtype=np.float64) * 4 - 2).astype(np_type)


def assert_close(
    actual: np.ndarray,
    expected: np.ndarray,
    *dtypes: str,
    accumulate: int = 0,
    magnitude: float = 1.0,
    accum_dtype: str = "float32",
) -> None:
    """Compare against a float64 (or exact integer) reference with dtype-aware tolerance.

    ``accumulate`` terms of size up to ``magnitude`` summed in ``accum_dtype`` widen
    ``atol`` by their worst rounding error (for reductions and GEMMs).
    """
    rtol, atol = tolerance(*dtypes)
    if accumulate:
        eps = float(np.finfo(accum_dtype).eps) if accum_dtype in _TOLERANCE else 0.0
        atol = max(atol, accumulate * magnitude * eps * 4)
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


def reduce(kind: str, x: np.ndarray, axis: int) -> np.ndarray:
    """numpy reference of T.reduce_<kind> along ``axis``."""
    if kind == "sum":
        return np.asarray(x.sum(axis))
    if kind == "max":
        return np.asarray(x.max(axis))
    if kind == "min":
        return np.asarray(x.min(axis))
    if kind == "abssum":
        return np.asarray(np.abs(x).sum(axis))
    if kind == "absmax":
        return np.asarray(np.abs(x).max(axis))
    raise ValueError(f"unknown reduction kind {kind!r}")


def reduce_into(kind: str, old: np.ndarray, reduced: np.ndarray) -> np.ndarray:
    """``clear=False``: fold the destination's old value into the reduction (TileLang semantics)."""
    if kind in ("sum", "abssum"):
        return old + reduced
    if kind in ("max", "absmax"):
        return np.maximum(old, reduced)
    return np.minimum(old, reduced)


def cumsum(x: np.ndarray, axis: int, reverse: bool = False) -> np.ndarray:
    """Inclusive prefix sum along ``axis`` (suffix sum when ``reverse``), in float64."""
    src = np.flip(x, axis) if reverse else x
    out = np.cumsum(src.astype(np.float64), axis=axis)
    return np.flip(out, axis) if reverse else out
