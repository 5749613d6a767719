"""Annotated layouts: swizzled shared buffers (T.annotate_layout) and T.use_swizzle block orders.

A layout annotation may change where elements live, never the result: a transpose
through a swizzled shared tile and a GEMM whose shared operands are swizzled must
match numpy for every shape. M and N are ``T.dynamic`` in the transpose.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts
from tile.lang.layout import make_swizzled_layout

COPY_DTYPES = ("float32", "float16", "int8")


def transpose_kernel(swizzle: str, bm: int, bn: int, dtype: str):
    M = T.dynamic("M")
    N = T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), dtype)
            Yt = T.alloc_fragment((bn, bm), dtype)
            if swizzle == "swizzled":
                T.annotate_layout({S: make_swizzled_layout(S)})
            if swizzle == "use_swizzle":
                T.use_swizzle(4)
            T.copy(X[by * bm, bx * bn], S)
            for j, i in T.Parallel(bn, bm):
                Yt[j, i] = S[i, j]
            T.copy(Yt, Y[bx * bn, by * bm])

    return main


def swizzled_gemm_kernel(M: int, N: int, K: int, swizzle: str, dtype: str):
    bm, bn, bk = 32, 32, 16

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            if swizzle == "swizzled":
                T.annotate_layout({A_s: make_swizzled_layout(A_s), B_s: make_swizzled_layout(B_s)})
            if swizzle == "use_swizzle":
                T.use_swizzle(2)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


@given(swizzle=ts.swizzles(), block=st.sampled_from([(16, 32), (32, 16), (64, 64)]), shape=ts.shapes_2d(200),
       seed=st.integers(0, 2**16), data=st.data())
def test_transpose_through_swizzled_shared(tile_backend, swizzle, block, shape, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, COPY_DTYPES), label="dtype")
    kernel = tile_backend.build(transpose_kernel, swizzle, *block, dtype, out_idx=(-1,))
    x = ref.random_array(np.random.default_rng(seed), shape, dtype)
    out = kernel(x)
    assert out.shape == shape[::-1]
    np.testing.assert_array_equal(out, x.T)


@given(swizzle=ts.swizzles(), mnk=st.sampled_from([(32, 32, 32), (45, 70, 19), (97, 13, 64)]),
       seed=st.integers(0, 2**16), data=st.data())
def test_gemm_with_swizzled_operands(tile_backend, swizzle, mnk, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16")), label="dtype")
    kernel = tile_backend.build(swizzled_gemm_kernel, *mnk, swizzle, dtype, out_idx=(-1,))
    M, N, K = mnk
    rng = np.random.default_rng(seed)
    a = ref.random_array(rng, (M, K), dtype)
    b = ref.random_array(rng, (K, N), dtype)
    ref.assert_close(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64), dtype,
                     accumulate=K, magnitude=4.0,
                     product_error=ref.gemm_product_error(dtype, tile_backend.capabilities))
