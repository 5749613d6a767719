"""Kernels written in the T namespace, compiled for the CPU and checked against numpy."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.kernels import staged_add


@settings(max_examples=6, deadline=None)
@given(
    M=st.integers(1, 70),
    N=st.integers(1, 70),
    bm=st.sampled_from([8, 16, 32]),
    bn=st.sampled_from([8, 32]),
    dtypes=st.sampled_from([("float32", "float32"), ("float16", "float32"), ("int32", "int32")]),
)
def test_elementwise_add_with_tails_and_casts(M, N, bm, bn, dtypes):
    in_dtype, out_dtype = dtypes
    kernel = tilelang.compile(staged_add(M, N, bm, bn, in_dtype, out_dtype), out_idx=[-1], target="cpu")
    rng = np.random.default_rng(M * 100 + N)
    a = (rng.standard_normal((M, N)) * 10).astype(in_dtype)
    b = (rng.standard_normal((M, N)) * 10).astype(in_dtype)
    c = kernel(a, b)
    np.testing.assert_allclose(c, a.astype(out_dtype) + b.astype(out_dtype), rtol=1e-6)


def test_reductions_along_rows():
    M, N = 24, 40

    @T.prim_func
    def rowstats(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"), Mx: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            X_f = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            mx = T.alloc_fragment((M,), "float32")
            T.copy(X, X_f)
            T.reduce_sum(X_f, s, dim=1)
            T.reduce_max(X_f, mx, dim=1, clear=True)
            T.copy(s, S)
            T.copy(mx, Mx)

    kernel = tilelang.compile(rowstats, out_idx=[1, 2], target="cpu")
    x = np.random.default_rng(1).standard_normal((M, N)).astype("float32")
    s, mx = kernel(x)
    np.testing.assert_allclose(s, x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mx, x.max(1))


def test_scalar_math_and_clear():
    N = 33

    @T.prim_func
    def softplus(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            acc = T.alloc_fragment((N,), "float32")
            T.clear(acc)
            for i in T.Parallel(N):
                acc[i] = acc[i] + T.log(T.exp(X[i]) + 1.0)
            for i in T.serial(N):
                Y[i] = T.max(acc[i], T.float32(0.5))

    kernel = tilelang.compile(softplus, out_idx=[-1], target="cpu")
    x = np.linspace(-3, 3, N).astype("float32")
    np.testing.assert_allclose(kernel(x), np.maximum(np.log1p(np.exp(x)), 0.5), rtol=1e-5)
