"""GEMM with a transposed B and an A operand held in a register fragment, in TileLang.

``C = A @ B.T``: B is stored (N, K) (as a linear layer's weight is), so the kernel
copies (block_N, block_K) tiles and calls ``T.gemm(..., transpose_B=True)``. A's tile
is loaded into a fragment (registers) instead of shared memory, the "rs" operand
form. M, N and K are not multiples of the blocks, so every axis has a tail tile.

Run: python examples/gemm_transpose_b_fragment_a.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul_nt(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_local = T.alloc_fragment((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_local)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_local, B_shared, C_local, transpose_B=True)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


if __name__ == "__main__":
    M, N, K = 200, 150, 100
    kernel = matmul_nt(M, N, K)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((N, K)).astype("float16")
    c = kernel(a, b)
    ref = a.astype("float32") @ b.astype("float32").T
    np.testing.assert_allclose(c.astype("float32"), ref, rtol=1e-2, atol=2e-2)
    print("gemm_transpose_b_fragment_a: OK")
