"""An independent numpy evaluation of a ``Program`` (an interpreter of the description,
sharing nothing with the compiler), and the tolerance a result is held to.

Values are float64 (integers: int64), rounded to the program's dtype after every
operation that the kernel stores in that dtype, so a float16 chain is compared with
float16 arithmetic.
"""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from .program import Program


def _is_int(dtype: str) -> bool:
    return np.issubdtype(ref.np_dtype(dtype), np.integer)


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    if _is_int(dtype):
        return x.astype(np.int64)
    return ref.cast(x, dtype).astype(np.float64)


def _apply(kind: str, c: float, w: np.ndarray, dtype: str) -> np.ndarray:
    const = int(c) if _is_int(dtype) else float(_round(np.asarray(c), dtype))
    if kind == "add":
        out = w + const
    elif kind == "mul":
        out = w * const
    elif kind == "max":
        out = np.maximum(w, const)
    elif kind == "min":
        out = np.minimum(w, const)
    elif kind == "neg":
        out = -w
    elif kind == "abs":
        out = np.abs(w)
    elif kind == "square":
        out = w * w
    else:
        raise ValueError(kind)
    return _round(out, dtype)


def _tile(x: np.ndarray, r0: int, c0: int, bm: int, bn: int, dtype: str) -> np.ndarray:
    """``T.copy`` of a (bm, bn) tile at (r0, c0): elements outside ``x`` read as 0."""
    out = np.zeros((bm, bn), dtype=np.int64 if _is_int(dtype) else np.float64)
    part = x[r0 : r0 + bm, c0 : c0 + bn]
    out[: part.shape[0], : part.shape[1]] = part
    return out


def block_tile(p: Program, x: np.ndarray, bx: int, by: int) -> np.ndarray:
    """W of block (bx, by) after the load and the element-wise chain."""
    r0 = by * p.bm
    if p.pipelined:
        w = _tile(x, r0, 0, p.bm, p.bn, p.dtype) * 0
        for k in range(p.chunks):
            w = _round(w + _tile(x, r0, k * p.bn, p.bm, p.bn, p.dtype), p.dtype)
    else:
        w = _tile(x, r0, bx * p.bn, p.bm, p.bn, p.dtype)
    rows = r0 + np.arange(p.bm)[:, None]
    cols = bx * p.bn + np.arange(p.bn)[None, :]
    inside = (rows < p.M) & (cols < p.N) if p.guard != "none" else np.ones((p.bm, p.bn), bool)
    v = w
    for kind, c in p.ops:
        v = _apply(kind, c, v, p.dtype)
    return np.where(inside, v, w)


def evaluate(p: Program, x: np.ndarray, b: np.ndarray, y0: np.ndarray) -> np.ndarray:
    """What ``p`` leaves in ``Y`` (``y0``: Y's contents before the call)."""
    x64 = x.astype(np.int64 if _is_int(p.dtype) else np.float64)
    y = y0.astype(np.float64).copy()
    gx, gy = p.grid
    for by in range(gy):
        for bx in range(gx):
            w = block_tile(p, x64, bx, by)
            if p.epilogue in ("store", "cumsum"):
                if p.epilogue == "cumsum":
                    w = _round(ref.cumsum(w, p.dim, p.reverse), p.dtype)
                r0, c0 = by * p.bm, bx * p.bn
                part = y[r0 : r0 + p.bm, c0 : c0 + p.bn]
                part[...] = w[: part.shape[0], : part.shape[1]]
            elif p.epilogue == "reduce":
                reduced = ref.reduce(p.reduce_kind, w.astype(np.float64), p.dim)
                if not p.clear:
                    init = _round(np.full(reduced.shape, p.init), p.dtype)
                    reduced = ref.reduce_into(p.reduce_kind, init, reduced)
                y[by, bx] = reduced
            elif p.epilogue == "gemm":
                a = w.T if p.trans_a else w
                bmat = b.astype(np.float64).T if p.trans_b else b.astype(np.float64)
                y[by, bx] = a.astype(np.float64) @ bmat
            else:  # atomic fold of every block's tile
                if p.atomic_kind == "add":
                    y = y + w
                elif p.atomic_kind == "max":
                    y = np.maximum(y, w)
                else:
                    y = np.minimum(y, w)
    return y


# -- magnitudes and tolerance ------------------------------------------------------------

#: Largest |input| drawn for each dtype (integers stay small so no chain overflows).
INPUT_BOUND = {"int8": 3, "uint8": 3, "int16": 20, "uint16": 20, "int32": 50, "uint32": 50, "int64": 50}


def input_bound(dtype: str) -> float:
    return float(INPUT_BOUND.get(dtype, 2.0))


def magnitude(p: Program) -> float:
    """An upper bound of |W| after the element-wise chain."""
    bound = input_bound(p.dtype) * (p.chunks if p.pipelined else 1)
    for kind, c in p.ops:
        if kind == "add":
            bound += abs(c)
        elif kind == "mul":
            bound *= abs(c)
        elif kind in ("max", "min"):
            bound = max(bound, abs(c))
        elif kind == "square":
            bound *= bound
    return bound


def result_bound(p: Program) -> float:
    """An upper bound of |Y| (what must fit the output dtype)."""
    w = magnitude(p)
    gx, gy = p.grid
    if p.epilogue == "cumsum":
        return w * (p.bm if p.dim == 0 else p.bn)
    if p.epilogue == "reduce":
        terms = p.bm if p.dim == 0 else p.bn
        return w * terms + abs(p.init) if p.reduce_kind in ("sum", "abssum") else max(w, abs(p.init))
    if p.epilogue == "gemm":
        return w * p.gemm_dims[1] * input_bound(p.dtype)
    if p.epilogue == "atomic" and p.atomic_kind == "add":
        return w * gx * gy + input_bound(p.dtype)
    return w


def fits(p: Program) -> bool:
    """Whether every intermediate and result stays representable (ints) or well-conditioned
    (floats: no magnitudes where the dtype's absolute rounding error swamps the check)."""
    bound = max(result_bound(p), magnitude(p))
    if _is_int(p.dtype):
        return bound <= np.iinfo(ref.np_dtype(p.dtype)).max // 2
    return bound <= {"float16": 2.0e3, "bfloat16": 2.0e3}.get(p.dtype, 1.0e6)


def data(p: Program, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs X, B and Y's starting contents, exact in the dtype."""
    bound = input_bound(p.dtype)

    def draw(shape: tuple[int, ...], dtype: str = p.dtype) -> np.ndarray:
        if _is_int(dtype):
            low = 0 if dtype.startswith("uint") else -int(bound)
            return rng.integers(low, int(bound) + 1, size=shape).astype(ref.np_dtype(dtype))
        return (rng.random(shape) * 2 * bound - bound).astype(ref.np_dtype(dtype))

    x = draw((p.M, p.N))
    b = draw(p.b_shape)
    atomic = p.epilogue == "atomic"
    y0 = draw(p.y_shape, p.y_dtype) if atomic else np.zeros(p.y_shape, ref.np_dtype(p.y_dtype))
    return x, b, y0


def _eps(dtype: str) -> float:
    try:
        return float(np.finfo(ref.np_dtype(dtype)).eps)
    except ValueError:  # bfloat16 and fp8 are ml_dtypes types, which numpy's finfo refuses
        import ml_dtypes

        return float(ml_dtypes.finfo(ref.np_dtype(dtype)).eps)


def check(p: Program, actual: np.ndarray, expected: np.ndarray, float32_gemm_error: float = 0.0) -> None:
    """Compare with a tolerance from the dtype, the chain's length and the sums involved."""
    if _is_int(p.dtype) and p.epilogue != "gemm":
        np.testing.assert_array_equal(np.asarray(actual, np.float64), expected)
        return
    w = magnitude(p)
    terms = len(p.ops) + 2 + (p.chunks if p.pipelined else 0)
    if p.epilogue == "cumsum" or p.epilogue == "reduce":
        terms += p.bm if p.dim == 0 else p.bn
    elif p.epilogue == "atomic":
        gx, gy = p.grid
        terms += gx * gy
    accum = "float32" if p.epilogue == "gemm" else p.dtype
    eps = _eps(p.dtype)
    atol = eps * max(w, 1.0) * terms
    if p.epilogue == "gemm":
        k = p.gemm_dims[1]
        per_term = max(w, 1.0) * input_bound(p.dtype)
        # float32 accumulation, tf32 products where the backend uses them, and W's own rounding
        chain = eps * (len(p.ops) + (p.chunks if p.pipelined else 0) + 1)
        atol = k * per_term * (4 * float(np.finfo(np.float32).eps) + float32_gemm_error + chain)
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=eps * 4, atol=atol,
                               err_msg=f"{p.describe()} (accumulating in {accum})")
