"""T.Parallel expressions over fragments with row/column broadcasting and math intrinsics.

M and N are ``T.dynamic``: one kernel per (expression, block, dtype) runs every shape,
primes and non-multiples of the block included.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts

#: name -> (tile expression of x, row r, col c), numpy reference
EXPRESSIONS = {
    "row_bias": (lambda x, r, c: x + r, lambda x, r, c: x + r),
    "col_scale": (lambda x, r, c: x * c, lambda x, r, c: x * c),
    "exp_shift": (lambda x, r, c: T.exp(x - r), lambda x, r, c: np.exp(x - r)),
    "exp2_log2": (lambda x, r, c: T.exp2(T.log2(T.abs(x) + 1.0)) * c,
                  lambda x, r, c: (np.abs(x) + 1.0) * c),
    "sqrt_rsqrt": (lambda x, r, c: T.sqrt(x * x + 1.0) + T.rsqrt(c * c + 1.0),
                   lambda x, r, c: np.sqrt(x * x + 1.0) + 1.0 / np.sqrt(c * c + 1.0)),
    "max_min": (lambda x, r, c: T.max(x, r) - T.min(x, c),
                lambda x, r, c: np.maximum(x, r) - np.minimum(x, c)),
    "select": (lambda x, r, c: T.if_then_else(x > r, x, c), lambda x, r, c: np.where(x > r, x, c)),
    "log_exp": (lambda x, r, c: T.log(T.exp(x) + T.exp(r)), lambda x, r, c: np.logaddexp(x, r)),
}


def broadcast_kernel(expr: str, bm: int, bn: int, dtype: str):
    M = T.dynamic("M")
    N = T.dynamic("N")
    tile_expr = EXPRESSIONS[expr][0]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Row: T.Tensor((M,), "float32"), Col: T.Tensor((N,), "float32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
            x = T.alloc_fragment((bm, bn), "float32")
            r = T.alloc_fragment((bm,), "float32")
            c = T.alloc_fragment((bn,), "float32")
            T.copy(X[by * bm, bx * bn], x)
            T.copy(Row[by * bm], r)
            T.copy(Col[bx * bn], c)
            for i, j in T.Parallel(bm, bn):
                x[i, j] = tile_expr(x[i, j], r[i], c[j])
            T.copy(x, Y[by * bm, bx * bn])

    return main


@given(expr=st.sampled_from(sorted(EXPRESSIONS)), block=st.sampled_from([(8, 16), (16, 8), (4, 32)]),
       shape=ts.shapes_2d(140), seed=st.integers(0, 2**16), data=st.data())
def test_parallel_expressions_broadcast(tile_backend, expr, block, shape, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16")), label="dtype")
    kernel = tile_backend.build(broadcast_kernel, expr, *block, dtype, out_idx=(-1,))
    M, N = shape
    rng = np.random.default_rng(seed)
    x = ref.random_array(rng, (M, N), dtype)
    row = ref.random_array(rng, (M,), "float32")
    col = ref.random_array(rng, (N,), "float32")
    out = kernel(x, row, col)
    expected = EXPRESSIONS[expr][1](x.astype(np.float64), row[:, None].astype(np.float64),
                                    col[None, :].astype(np.float64))
    ref.assert_close(out, expected, "float32", accumulate=4, magnitude=8.0)


def named_guard_kernel(M: int, N: int, bm: int, bn: int):
    """ReLU(X * W + B) with the row and column named inside ``T.Parallel`` and used as the guard."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
             Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                r = by * bm + i
                c = bx * bn + j
                if r < M and c < N:
                    Y[r, c] = T.max(X[r, c] * W[c] + B[c], T.cast(0, "float32"))

    return main


@pytest.mark.parametrize("shape", [(32, 32), (19, 37)], ids=["even", "ragged"])
def test_values_named_in_a_parallel_loop_guard_its_stores(tile_backend, shape) -> None:
    # Regression (issue 17): split_dynamic_tails hoisted `if r < M` above the scope defining r.
    M, N = shape
    kernel = tile_backend.build(named_guard_kernel, M, N, 16, 16)
    rng = np.random.default_rng(M)
    x = ref.random_array(rng, (M, N), "float32")
    w = ref.random_array(rng, (N,), "float32")
    b = ref.random_array(rng, (N,), "float32")
    y = np.full((M, N), -7.0, "float32")
    kernel(x, w, b, y)
    np.testing.assert_allclose(y, np.maximum(x * w + b, 0.0), rtol=1e-6, atol=1e-6)
