"""RMSNorm in TileLang, unchanged except for the two import lines.

``Y = X * rsqrt(mean(X**2, axis=1) + eps) * W``: a ``T.reduce_sum`` of squares per
row, ``T.rsqrt`` in a one-dimensional ``T.Parallel``, then a rescale.

Run: python examples/rms_norm.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def rms_norm(M, N, block_M=16, eps=1e-6, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            x_sq = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            inv_rms = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M : (bx + 1) * block_M, :], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                x_sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(x_sq, inv_rms, dim=1)
            for i in T.Parallel(block_M):
                inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * inv_rms[i] * w[j]
            T.copy(x, Y[bx * block_M : (bx + 1) * block_M, :])

    return main


def reference(x, w, eps=1e-6):
    x = x.astype("float32")
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w.astype("float32")


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for dtype, tol in (("float32", 1e-5), ("float16", 2e-3)):
        M, N = 1000, 333
        kernel = rms_norm(M, N, dtype=dtype)
        x = rng.standard_normal((M, N)).astype(dtype)
        w = rng.standard_normal(N).astype(dtype)
        np.testing.assert_allclose(kernel(x, w).astype("float32"), reference(x, w), rtol=tol, atol=tol)
    print("rms_norm: OK")
