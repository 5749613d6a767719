"""The TileLang paper's GEMM (Figure 1), unchanged except for the two import lines;
checked on whole tiles and on sizes that are multiples of no tile dimension.

Run: python examples/gemm.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for M, N, K in ((256, 256, 256), (1000, 777, 333)):  # whole tiles; partial tiles on every axis
        func = matmul(M, N, K, 128, 128, 32)
        kernel = tilelang.compile(func, out_idx=[2])
        a = rng.standard_normal((M, K)).astype("float16")
        b = rng.standard_normal((K, N)).astype("float16")
        c = kernel(a, b)
        ref = (a.astype("float32") @ b.astype("float32")).astype("float16")
        np.testing.assert_allclose(c, ref, rtol=1e-2, atol=5e-2)
    print("gemm: OK")
