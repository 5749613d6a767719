"""Scalar locals inside T.Parallel bodies compute per element (a vectorizer regression).

apache-tvm 0.27's vectorizer shares one flattened slot for a scalar ``Bind`` across
lanes; ``vectorize_parallel_loops`` gives each local one slot per lane before it
vectorizes, so every element gets its own value and the loop is still vectorized.
"""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T


def local_var_kernel(M: int, N: int):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(M, N):
                x = A[i, j] * 0.75
                y = x * x
                Y[i, j] = y + x + T.cast(bx, "float32")

    return main


@pytest.mark.parametrize(("M", "N"), [(8, 64), (3, 16), (5, 7), (3, 200)])
def test_scalar_locals_in_parallel_body_are_per_element(M: int, N: int) -> None:
    kernel = tilelang.compile(local_var_kernel(M, N), target="cpu")
    a = np.random.default_rng(M * N).random((M, N), dtype=np.float32)
    y = np.zeros_like(a)
    kernel(a, y)
    x = a * np.float32(0.75)
    np.testing.assert_allclose(y, x * x + x, rtol=1e-6)
    assert "T.vectorized" in kernel.get_kernel_source("tir")
