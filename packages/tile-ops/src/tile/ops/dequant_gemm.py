"""Weight-only dequantized GEMM (the TileLang paper's appendix B.2) in tile.lang.

``Ct = dequant(B) @ A^T`` where A is an fp16/fp32 activation (M, K) and B holds the
(N, K) weight as 4-bit codes, two per ``uint8`` (element ``k`` of a row sits in
byte ``k // 2``, the low nibble for even ``k``). Each step copies a packed tile to a
fragment, decodes it in ``T.Parallel`` into a fragment of the compute type, and
feeds that fragment as the A operand of ``T.gemm(..., transpose_B=True)``.

Formats (``fmt``):

- ``"fp4"``: OCP MX FP4 E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit; the codes
  0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8..15 their negatives.
- ``"int4"``: signed two's complement -8..7 times a per-(row, group) ``Scale`` of shape
  (N, K // group_size).

Example::

    >>> import numpy as np
    >>> from tile.ops.dequant_gemm import dequant_matmul, pack_4bit
    >>> a = np.ones((2, 4), "float32"); codes = np.array([[1, 2, 3, 7]], "uint8")  # fp4
    >>> float(dequant_matmul(a, pack_4bit(codes), fmt="fp4", target="cpu")[1, 0])
    9.0
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import tile.lang as tilelang
import tile.lang.language as T

from ._src.configs import Tiling, tiled
from ._src.errors import bad_argument
from ._src.runtime import dtype_name, matrix_dims, target_key

FP4_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FORMATS = ("fp4", "int4")


def unpack_4bit(packed: Any, pos: Any) -> Any:
    """The 4-bit code ``pos`` (0 low nibble, 1 high) of the byte expression ``packed``."""
    return (packed >> T.cast(4 * pos, "uint8")) & T.uint8(15)


def fp4_e2m1_to(code: Any, dtype: str) -> Any:
    """Decode an E2M1 code (a uint8 expression in 0..15) into ``dtype``."""
    sign = code >> 3
    exponent = (code >> 1) & 3
    mantissa = T.cast(code & 1, dtype)
    subnormal = mantissa * 0.5
    normal = (mantissa * 0.5 + 1.0) * T.cast((1 << exponent) >> 1, dtype)  # 2 ** (exponent - 1)
    magnitude = T.if_then_else(exponent == 0, subnormal, normal)
    return T.if_then_else(sign == 1, -magnitude, magnitude)


def int4_to(code: Any, dtype: str) -> Any:
    """Decode a two's complement int4 code (a uint8 expression in 0..15) into ``dtype``."""
    value = T.cast(code, "int32")
    return T.cast(T.if_then_else(value >= 8, value - 16, value), dtype)


@tiled(block_M=64, block_N=64, block_K=64, num_stages=2, threads=128)
def dequant_gemm_kernel(
    M: int,
    N: int,
    K: int,
    fmt: str = "fp4",
    in_dtype: str = "float16",
    out_dtype: str = "float16",
    accum_dtype: str = "float32",
    group_size: int = 32,
    *,
    tiling: Tiling,
) -> Any:
    """A kernel ``(A, B[, Scale]) -> Ct`` with Ct (N, M) = dequant(B) (N, K) @ A^T. The tiling
    is keyword arguments (``block_K=128, ...``) or one ``tiling=Tiling(...)``."""
    block_M, block_N, block_K = tiling.block_M, tiling.block_N, tiling.block_K
    num_stages, threads = tiling.num_stages, tiling.threads
    if fmt not in FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}; use one of {', '.join(FORMATS)}")
    if K % 2:
        raise ValueError(f"K = {K} must be even: two 4-bit weights share a byte")
    num_elems_per_byte = 2
    B_shape = (N, K // num_elems_per_byte)
    B_shared_shape = (block_N, block_K // num_elems_per_byte)
    if fmt == "int4" and (block_K % group_size or K % group_size):
        raise ValueError(f"group_size {group_size} must divide block_K = {block_K} and K = {K}")
    groups_per_block = block_K // group_size

    @T.macro
    def body(A, B, Scale, Ct):  # type: ignore[no-untyped-def]
        """Both formats' block: int4 passes its ``Scale``, fp4 ``None``."""
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, "uint8")
            B_local = T.alloc_fragment(B_shared_shape, "uint8")
            if Scale is not None:
                Scale_local = T.alloc_fragment((block_N, groups_per_block), in_dtype)
            B_dequantize_local = T.alloc_fragment((block_N, block_K), in_dtype)
            Ct_local = T.alloc_fragment((block_N, block_M), accum_dtype)
            T.clear(Ct_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                if Scale is not None:
                    T.copy(Scale[bx * block_N, k * groups_per_block], Scale_local)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    code = unpack_4bit(B_local[i, j // 2], j % 2)
                    if Scale is None:
                        B_dequantize_local[i, j] = fp4_e2m1_to(code, in_dtype)
                    else:
                        B_dequantize_local[i, j] = int4_to(code, in_dtype) * Scale_local[i, j // group_size]
                T.gemm(B_dequantize_local, A_shared, Ct_local, transpose_B=True)
            T.copy(Ct_local, Ct[bx * block_N, by * block_M])

    @T.prim_func
    def matmul_fp4(
        A: T.Tensor((M, K), in_dtype),  # type: ignore[valid-type]
        B: T.Tensor(B_shape, "uint8"),  # type: ignore[valid-type]
        Ct: T.Tensor((N, M), out_dtype),  # type: ignore[valid-type]
    ):
        body(A, B, None, Ct)

    @T.prim_func
    def matmul_int4(
        A: T.Tensor((M, K), in_dtype),  # type: ignore[valid-type]
        B: T.Tensor(B_shape, "uint8"),  # type: ignore[valid-type]
        Scale: T.Tensor((N, K // group_size), in_dtype),  # type: ignore[valid-type]
        Ct: T.Tensor((N, M), out_dtype),  # type: ignore[valid-type]
    ):
        body(A, B, Scale, Ct)

    return matmul_fp4 if fmt == "fp4" else matmul_int4


def pack_4bit(codes: Any) -> np.ndarray:
    """Pack an (N, K) array of 4-bit codes (0..15) two per byte along K (low nibble first)."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.ndim != 2 or codes.shape[1] % 2:
        raise ValueError(f"pack_4bit needs an (N, K) array with even K, got shape {codes.shape}")
    if codes.max(initial=0) > 15:
        raise ValueError("pack_4bit codes must lie in 0..15")
    return np.ascontiguousarray(codes[:, 0::2] | (codes[:, 1::2] << 4))


def dequantize(packed: Any, fmt: str, scale: Any = None, group_size: int = 32) -> np.ndarray:
    """numpy reference decode of packed (N, K // 2) weights to float32 (N, K)."""
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(packed.shape[0], -1)
    if fmt == "fp4":
        table = np.array(FP4_E2M1_VALUES + tuple(-v for v in FP4_E2M1_VALUES), dtype=np.float32)
        return np.asarray(table[codes])
    values = np.where(codes >= 8, codes.astype(np.int32) - 16, codes).astype(np.float32)
    return np.asarray(values * np.repeat(np.asarray(scale, dtype=np.float32), group_size, axis=1))


@functools.cache
def _compiled(M: int, N: int, K: int, fmt: str, dtype: str, group_size: int, target: str) -> Any:
    func = dequant_gemm_kernel(M, N, K, fmt, dtype, dtype, group_size=group_size, block_K=max(64, group_size))
    return tilelang.compile(func, out_idx=[-1], target=target)


def dequant_matmul(
    a: Any, b_packed: Any, scale: Any = None, fmt: str = "fp4", group_size: int = 32, target: str = "auto"
) -> Any:
    """``a @ dequant(b).T``: a (M, K) activations, b_packed (N, K // 2) uint8 -> (M, N)."""
    M, K = matrix_dims("dequant_matmul", "a", a)
    N = int(b_packed.shape[0])
    if tuple(b_packed.shape) != (N, K // 2):
        raise bad_argument("dequant_matmul", "b_packed", f"has shape {tuple(b_packed.shape)}",
                           f"two 4-bit codes a byte: pass (N, {K // 2}) bytes (pack_4bit)")
    if (fmt == "int4") != (scale is not None):
        problem = "is given for fp4" if scale is not None else "is missing"
        raise bad_argument("dequant_matmul", "scale", problem,
                           "int4 weights need a scale of shape (N, K // group_size); fp4 weights take none")
    kernel = _compiled(M, N, K, fmt, dtype_name(a), group_size, target_key(target))
    ct = kernel(a, b_packed) if scale is None else kernel(a, b_packed, scale)
    return ct.T
