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


def row_scan_kernel(bm: int, bn: int, threads: int, dtype: str):
    """A ``T.Parallel`` over rows whose body walks the row with a serial loop (TileLang's
    reducer tests, ``Parallel(M) { serial(K) }``): the fragment read at ``x[i, k]`` must
    keep each row on the thread(s) of iteration ``i``, whatever its ``T.copy`` would pick."""
    M = T.dynamic("M")

    @T.prim_func
    def main(X: T.Tensor((M, bn), dtype), Y: T.Tensor((M, bn), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            x = T.alloc_fragment((bm, bn), dtype)
            y = T.alloc_fragment((bm, bn), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            for i in T.Parallel(bm):
                s[i] = 0.0
                for k in T.serial(bn):
                    # order-dependent: a row split over threads gives other values
                    s[i] = s[i] * 0.5 + T.cast(x[i, k], "float32")
                    y[i, k] = s[i]
            T.copy(y, Y[bx * bm, 0])
            T.copy(s, S[bx * bm])

    return main


@given(block=st.sampled_from([(8, 16, 64), (32, 8, 32), (4, 12, 128)]), rows=st.integers(1, 70),
       seed=st.integers(0, 2**16), data=st.data())
def test_parallel_rows_with_a_serial_loop_inside(tile_backend, block, rows, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16")), label="dtype")
    bm, bn, threads = block
    kernel = tile_backend.build(row_scan_kernel, bm, bn, threads, dtype, out_idx=(-2, -1))
    rng = np.random.default_rng(seed)
    x = ref.random_array(rng, (rows, bn), dtype)
    y, s = kernel(x)
    expected = np.zeros((rows, bn))
    acc = np.zeros(rows)
    for k in range(bn):
        acc = acc * 0.5 + x[:, k].astype(np.float64)
        expected[:, k] = acc
    ref.assert_close(y, expected, "float32", accumulate=4)
    ref.assert_close(s, acc, "float32", accumulate=4)
