"""Row softmax in TileLang, unchanged except for the two import lines.

Each block owns ``block_M`` whole rows: ``T.reduce_max`` finds the row maximum,
``T.Parallel`` exponentiates, ``T.reduce_sum`` normalizes. M is not a multiple of
the block, so the last block's copies are predicated.

Run: python examples/softmax.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def softmax(M, N, block_M=16, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] /= row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x):
    x = x.astype("float32")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for dtype, tol in (("float32", 1e-6), ("float16", 1e-3)):
        M, N = 1000, 333  # neither is a multiple of anything in the kernel
        kernel = softmax(M, N, dtype=dtype)
        x = (rng.standard_normal((M, N)) * 3).astype(dtype)
        np.testing.assert_allclose(kernel(x).astype("float32"), reference(x), rtol=tol, atol=tol)
    print("softmax: OK")
