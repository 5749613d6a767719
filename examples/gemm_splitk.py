"""Split-K GEMM in TileLang: blocks along a third grid axis each reduce one slice of K
and add their partial C tile into the output with ``T.atomic_add``.

The output starts at zero; ``split_k`` blocks add into every C tile. On the CPU, a
kernel with atomics on global memory runs its blocks one after another, so the sums
are exact; on a GPU they are hardware atomics.

Run: python examples/gemm_splitk.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


def matmul_splitk(M, N, K, split_k, block_M=32, block_N=32, block_K=32, dtype="float16", accum_dtype="float"):
    k_per_split = T.ceildiv(T.ceildiv(K, split_k), block_K) * block_K  # whole K tiles per split

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(k_per_split // block_K, num_stages=2):
                T.copy(A[by * block_M, bz * k_per_split + ko * block_K], A_shared)
                T.copy(B[bz * k_per_split + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return main


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for M, N, K, split_k in ((128, 128, 256, 4), (100, 70, 300, 3)):
        kernel = tilelang.compile(matmul_splitk(M, N, K, split_k))
        a = rng.standard_normal((M, K)).astype("float16")
        b = rng.standard_normal((K, N)).astype("float16")
        c = np.zeros((M, N), "float32")
        kernel(a, b, c)
        np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)
    print("gemm_splitk: OK")
