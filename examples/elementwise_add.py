"""A TileLang elementwise add with tails, unchanged except for the two import lines.

Run: python examples/elementwise_add.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def elementwise_add(M, N, block_M, block_N, in_dtype="float32", out_dtype="float32", threads=128):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), in_dtype),
        B: T.Tensor((M, N), in_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), in_dtype)
            B_shared = T.alloc_shared((block_M, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), out_dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)

            T.copy(A[by * block_M, bx * block_N], A_shared)
            T.copy(B[by * block_M, bx * block_N], B_shared)
            for local_y, local_x in T.Parallel(block_M, block_N):
                C_local[local_y, local_x] = A_shared[local_y, local_x] + B_shared[local_y, local_x]
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


if __name__ == "__main__":
    M, N = 1000, 777  # not multiples of the block: the last tiles are partial
    kernel = elementwise_add(M, N, 128, 128)
    a = np.random.randn(M, N).astype("float32")
    b = np.random.randn(M, N).astype("float32")
    c = kernel(a, b)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    print("elementwise_add: OK")
