"""numpy references and dtype-aware tolerances."""

from __future__ import annotations

import statistics
from typing import Any

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


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` converted to ``dtype`` as a tile kernel converts it: numpy's ``astype`` (ml_dtypes'
    for bfloat16 and fp8), except that fp8 *saturates*: +-inf and values past the largest finite
    one become that value with its sign, as PTX's ``cvt.rn.satfinite`` does on every GPU (ml_dtypes
    gives NaN or inf there). NaN stays NaN."""
    np_type = np_dtype(dtype)
    if dtype.startswith("float8"):
        import ml_dtypes

        top = float(ml_dtypes.finfo(np_type).max)
        x = np.clip(np.asarray(x), -top, top)  # clipping first rounds alike: past the top is above its tie
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(np_type)


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
    product_error: float = 0.0,
) -> None:
    """Compare against a float64 (or exact integer) reference with dtype-aware tolerance.

    ``accumulate`` terms of size up to ``magnitude`` summed in ``accum_dtype`` widen
    ``atol`` by their worst rounding error (for reductions and GEMMs); ``product_error``
    is each term's own relative error on top (``gemm_product_error``: tf32 operands).
    """
    rtol, atol = tolerance(*dtypes)
    if accumulate:
        eps = float(np.finfo(accum_dtype).eps) if accum_dtype in _TOLERANCE else 0.0
        atol = max(atol, accumulate * magnitude * (eps * 4 + product_error))
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


def gemm_product_error(dtype: str, capabilities: Any) -> float:
    """Relative error of one product of a ``T.gemm`` on ``dtype`` operands, beyond the sum's.

    Exact products (0.0), except float32 operands on a backend whose ``float32_gemm`` is
    ``"tfloat32"``: each operand keeps 10 mantissa bits (truncated, or rounded: the ISA
    leaves it to the implementation), so a product may be off by 2 * 2^-10 of its size.
    """
    if dtype == "float32" and getattr(capabilities, "float32_gemm", "float32") == "tfloat32":
        return 2.0 * 2.0**-10
    return 0.0


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


def softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(Q K^T / sqrt(d)) V in float64 for (batch, seq, heads, dim) arrays."""
    q64, k64, v64 = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    scores = q64 @ k64.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        s = scores.shape[-1]
        scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return np.asarray((p / p.sum(-1, keepdims=True) @ v64).transpose(0, 2, 1, 3))


def mla_decode(q: np.ndarray, q_pe: np.ndarray, kv: np.ndarray, k_pe: np.ndarray) -> np.ndarray:
    """One MLA decode step: heads share ``kv`` per KV group; scores use the rotary part too."""
    group = q.shape[1] // kv.shape[2]
    kv64 = np.repeat(kv.astype(np.float64), group, axis=2)
    kpe64 = np.repeat(k_pe.astype(np.float64), group, axis=2)
    scores = np.einsum("bhd,bshd->bhs", q.astype(np.float64), kv64)
    scores += np.einsum("bhp,bshp->bhs", q_pe.astype(np.float64), kpe64)
    scores /= np.sqrt(q.shape[-1] + q_pe.shape[-1])
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return np.asarray(np.einsum("bhs,bshd->bhd", p / p.sum(-1, keepdims=True), kv64))


#: fp4 e2m1 magnitudes by 3-bit code; bit 3 is the sign.
FP4_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def nf4_levels() -> np.ndarray:
    """The 16 NormalFloat4 levels by code, rebuilt from their definition (QLoRA): normal
    quantiles at 8 evenly spaced probabilities from 0.9677083 to 0.5 (exclusive) above zero and 7
    below, with 0, scaled so the largest is 1; independent of the op library's table."""
    inv_cdf = statistics.NormalDist().inv_cdf
    above = [inv_cdf(float(p)) for p in np.linspace(0.9677083, 0.5, 9)[:-1]]
    below = [-inv_cdf(float(p)) for p in np.linspace(0.9677083, 0.5, 8)[:-1]]
    levels = np.sort(np.array([*above, 0.0, *below]))
    return np.asarray(levels / levels.max())


def unpack_4bit(packed: np.ndarray, fmt: str, scale: np.ndarray | None = None, group: int = 32) -> np.ndarray:
    """Decode (N, K // 2) bytes, low nibble first, to float64 (N, K): fp4 e2m1 or scaled int4."""
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(packed.shape[0], -1).astype(np.int64)
    if fmt == "fp4":
        mag = np.asarray(FP4_E2M1, dtype=np.float64)[codes & 7]
        return np.where(codes >= 8, -mag, mag)
    values = np.where(codes >= 8, codes - 16, codes).astype(np.float64)
    assert scale is not None
    return np.asarray(values * np.repeat(scale.astype(np.float64), group, axis=1))
