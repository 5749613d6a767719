"""Weight-only INT4 dequantized GEMM with per-group scales in TileLang, unchanged
except for the two import lines.

B holds signed (two's complement, -8..7) 4-bit weights, two per byte; each group of
``group_size`` weights along K shares an fp16 scale. A tile of codes is decoded and
scaled in ``T.Parallel`` into a fragment that feeds ``T.gemm(..., transpose_B=True)``.

Run: python examples/dequant_gemm_int4.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


def _tir_packed_to_signed_convert(nbit, val, pos, dtype):
    """The ``pos``-th ``nbit``-bit field of the byte ``val``, sign-extended, as ``dtype``."""
    field = T.cast((val >> T.cast(pos * nbit, "uint8")) & T.uint8((1 << nbit) - 1), "int32")
    return T.cast(T.if_then_else(field >= (1 << (nbit - 1)), field - (1 << nbit), field), dtype)


@tilelang.jit(out_idx=[-1])
def matmul_fp16_int4(M, N, K, group_size=32, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128):
    num_bits = 4
    num_elems_per_byte = 8 // num_bits
    in_dtype, out_dtype, accum_dtype, storage_dtype = "float16", "float16", "float", "uint8"
    groups_per_block = block_K // group_size

    @T.prim_func
    def main(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((N, K // num_elems_per_byte), storage_dtype),
        Scale: T.Tensor((N, K // group_size), in_dtype),
        Ct: T.Tensor((N, M), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_local = T.alloc_fragment((block_N, block_K // num_elems_per_byte), storage_dtype)
            Scale_local = T.alloc_fragment((block_N, groups_per_block), in_dtype)
            B_dequantize_local = T.alloc_fragment((block_N, block_K), in_dtype)
            Ct_local = T.alloc_fragment((block_N, block_M), accum_dtype)

            T.clear(Ct_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(Scale[bx * block_N, k * groups_per_block], Scale_local)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    B_dequantize_local[i, j] = (
                        _tir_packed_to_signed_convert(num_bits, B_local[i, j // 2], j % 2, in_dtype)
                        * Scale_local[i, j // group_size]
                    )
                T.gemm(B_dequantize_local, A_shared, Ct_local, transpose_B=True)
            T.copy(Ct_local, Ct[bx * block_N, by * block_M])

    return main


def reference(a, b_packed, scale, group_size):
    codes = np.stack([b_packed & 15, b_packed >> 4], axis=-1).reshape(b_packed.shape[0], -1).astype("int32")
    weights = np.where(codes >= 8, codes - 16, codes) * np.repeat(scale.astype("float32"), group_size, axis=1)
    return weights @ a.astype("float32").T  # (N, M)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    group_size = 32
    for M, N, K in ((256, 256, 256), (100, 70, 192)):  # whole tiles, then partial ones
        kernel = matmul_fp16_int4(M, N, K, group_size=group_size)
        a = rng.standard_normal((M, K)).astype("float16")
        codes = rng.integers(0, 16, size=(N, K), dtype="uint8")
        b_packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
        scale = (rng.random((N, K // group_size)) * 0.1 + 0.01).astype("float16")
        out = kernel(a, b_packed, scale).astype("float32")
        np.testing.assert_allclose(out, reference(a, b_packed, scale, group_size), rtol=1e-2, atol=5e-2)
    print("dequant_gemm_int4: OK")
