"""T.dynamic / T.symbolic dims: one compiled kernel runs many shapes (split main loop + tail)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts


def axpy_kernel(which: str, bm: int, bn: int, dtype: str):
    M = T.dynamic("M") if which in ("M", "MN") else 24
    N = T.symbolic("N") if which in ("N", "MN") else 40

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            xs = T.alloc_shared((bm, bn), dtype)
            yf = T.alloc_fragment((bm, bn), "float32")
            T.copy(X[by * bm, bx * bn], xs)
            T.copy(Y[by * bm, bx * bn], yf)
            for i, j in T.Parallel(bm, bn):
                yf[i, j] = yf[i, j] + 3.0 * xs[i, j]
            T.copy(yf, Z[by * bm, bx * bn])

    return main


@given(which=st.sampled_from(["M", "N", "MN"]), block=st.sampled_from([(16, 16), (32, 8)]),
       shape=ts.shapes_2d(260), seed=st.integers(0, 2**16), data=st.data())
def test_one_kernel_many_shapes(tile_backend, which, block, shape, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16")), label="dtype")
    kernel = tile_backend.build(axpy_kernel, which, *block, dtype, out_idx=(-1,))
    M = shape[0] if which in ("M", "MN") else 24
    N = shape[1] if which in ("N", "MN") else 40
    rng = np.random.default_rng(seed)
    x = ref.random_array(rng, (M, N), dtype)
    y = ref.random_array(rng, (M, N), dtype)
    out = kernel(x, y)
    assert out.shape == (M, N)
    ref.assert_close(out, y.astype(np.float64) + 3.0 * x.astype(np.float64), dtype, "float32")
