"""GEMM with a symbolic M in TileLang, unchanged except for the two import lines.

``M = T.dynamic("m")`` is a shape variable: the kernel is compiled once and each
call binds ``m`` from the shape of ``A`` (the output ``C`` is sized from it). The
grid ``T.ceildiv(M, block_M)`` and the tail tile's bounds follow the bound value.

Run: python examples/gemm_dynamic_m.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul_dynamic_m(N, K, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float"):
    M = T.dynamic("m")

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
    N, K = 256, 192
    kernel = matmul_dynamic_m(N, K)  # compiled once, for every M
    rng = np.random.default_rng(0)
    b = rng.standard_normal((K, N)).astype("float16")
    for M in (1, 100, 512):  # a single row, a partial block, whole blocks
        a = rng.standard_normal((M, K)).astype("float16")
        c = kernel(a, b)
        assert c.shape == (M, N)
        ref = a.astype("float32") @ b.astype("float32")
        np.testing.assert_allclose(c.astype("float32"), ref, rtol=1e-2, atol=5e-2)
    assert matmul_dynamic_m(N, K) is kernel  # the factory returns the same compiled kernel
    print("gemm_dynamic_m: OK")
