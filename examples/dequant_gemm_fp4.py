"""Weight-only FP4 (E2M1) dequantized GEMM, the TileLang paper's appendix B.2,
unchanged except for the two import lines and the decode helper written out below.

``Ct = dequant(B) @ A^T``: B holds two 4-bit E2M1 codes per byte; each tile is decoded
in ``T.Parallel`` into the fragment ``B_dequantize_local``, which is the A operand
of ``T.gemm(..., transpose_B=True)``.

Run: python examples/dequant_gemm_fp4.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


def _tir_u8_to_f4_to_float(nbit, val, pos, dtype):
    """Decode the ``pos``-th ``nbit``-bit field of the byte ``val`` as an OCP MX E2M1 number:
    1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit -> 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    code = (val >> T.cast(pos * nbit, "uint8")) & T.uint8((1 << nbit) - 1)
    sign = code >> 3
    exponent = (code >> 1) & 3
    mantissa = T.cast(code & 1, dtype)
    magnitude = T.if_then_else(
        exponent == 0,
        mantissa * 0.5,  # subnormal: 0 or 0.5
        (mantissa * 0.5 + 1.0) * T.cast((1 << exponent) >> 1, dtype),  # 1.m * 2 ** (exponent - 1)
    )
    return T.if_then_else(sign == 1, -magnitude, magnitude)


@tilelang.jit(out_idx=[-1])
def matmul_fp16_fp4(M, N, K, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128):
    num_bits = 4
    num_elems_per_byte = 8 // num_bits
    in_dtype, out_dtype, accum_dtype, storage_dtype = "float16", "float16", "float", "uint8"
    A_shape = (M, K)
    B_shape = (N, K // num_elems_per_byte)
    A_shared_shape = (block_M, block_K)
    B_shared_shape = (block_N, block_K // num_elems_per_byte)
    B_dequantize_shared_shape = (block_N, block_K)

    @T.prim_func
    def main(
        A: T.Tensor(A_shape, in_dtype),
        B: T.Tensor(B_shape, storage_dtype),
        Ct: T.Tensor((N, M), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, storage_dtype)
            B_local = T.alloc_fragment(B_shared_shape, storage_dtype)
            B_dequantize_local = T.alloc_fragment(B_dequantize_shared_shape, in_dtype)
            Ct_local = T.alloc_fragment((block_N, block_M), accum_dtype)

            T.clear(Ct_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_local[i, j] = _tir_u8_to_f4_to_float(
                        num_bits, B_local[i, j // 2], j % 2, in_dtype
                    )
                T.gemm(B_dequantize_local, A_shared, Ct_local, transpose_B=True)
            T.copy(Ct_local, Ct[bx * block_N, by * block_M])

    return main


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype="float32")


def reference(a, b_packed):
    codes = np.stack([b_packed & 15, b_packed >> 4], axis=-1).reshape(b_packed.shape[0], -1)
    return E2M1[codes] @ a.astype("float32").T  # (N, M)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for M, N, K in ((256, 256, 256), (100, 70, 200)):  # whole tiles, then partial ones
        kernel = matmul_fp16_fp4(M, N, K)
        a = rng.standard_normal((M, K)).astype("float16")
        codes = rng.integers(0, 16, size=(N, K), dtype="uint8")
        b_packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # low nibble holds the even column
        np.testing.assert_allclose(
            kernel(a, b_packed).astype("float32"), reference(a, b_packed), rtol=1e-2, atol=5e-2
        )
    print("dequant_gemm_fp4: OK")
