"""Weight-only quantized matmul: ``a @ dequant(b).T`` for int4, int2, nf4 and fp4 weights.

Weights are (N, K) codes of ``bits`` bits packed along K, ``8 // bits`` to a byte, lowest
bits first: code ``k`` of a row sits in byte ``k // per_byte`` at bit ``(k % per_byte) * bits``
(``pack_codes``). A code decodes to a value, then per group of ``group_size`` consecutive
K (one ``scale``, and for the integer formats an optional ``zeros``, per (row, group))::

    w[n, k] = (value(code[n, k]) - zeros[n, k // group_size]) * scale[n, k // group_size]

Formats:

- ``int4``: two's complement -8..7; scale required, zeros optional (an asymmetric AWQ/GPTQ
  weight stored as unsigned ``u`` with zero point ``z`` is ``code = u - 8``, ``zeros = z - 8``).
- ``int2``: two's complement -2..1; scale required, zeros optional.
- ``nf4``: the 16 NormalFloat4 levels (quantiles of a normal distribution scaled to [-1, 1],
  from the QLoRA paper); scale (the group's absmax) required, no zeros.
- ``fp4``: OCP E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives); scale optional (an MX-style
  group scale), no zeros.

One kernel, two bodies: a tiled GEMM (``T.gemm`` on a tile dequantized into shared memory)
for several activation rows, and for one row (decoding) a GEMV that streams each packed
weight byte once and multiplies in ``T.Parallel`` with no padding of M to a tile.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import tile.lang.language as T

from .configs import Tiling, accum_dtype, dequant_config, target_capabilities
from .runtime import compiled, dtype_name, is_torch

FP4_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
NF4 = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0,
)  # fmt: skip
BITS = {"int4": 4, "int2": 2, "nf4": 4, "fp4": 4}
FORMATS = tuple(BITS)
CODES_PER_BYTE = {fmt: 8 // bits for fmt, bits in BITS.items()}
SCALE_REQUIRED = ("int4", "int2", "nf4")
ZERO_FORMATS = ("int4", "int2")
TABLES = {"nf4": NF4, "fp4": FP4_E2M1}


def values(fmt: str) -> np.ndarray:
    """The value of every code 0 .. 2**bits - 1 of ``fmt``, as float32."""
    if fmt in TABLES:
        return np.array(TABLES[fmt], dtype=np.float32)
    n = 1 << BITS[fmt]
    codes = np.arange(n)
    return np.where(codes >= n // 2, codes - n, codes).astype(np.float32)


def pack_codes(codes: Any, fmt: str) -> np.ndarray:
    """Pack an (N, K) array of ``fmt`` codes into (N, K // per_byte) uint8, lowest bits first."""
    codes = np.asarray(codes)
    bits, per_byte = BITS[fmt], CODES_PER_BYTE[fmt]
    if codes.ndim != 2 or codes.shape[1] % per_byte:
        raise ValueError(f"pack_codes needs (N, K) codes with K a multiple of {per_byte}, got {codes.shape}")
    if codes.min(initial=0) < 0 or codes.max(initial=0) >= 1 << bits:
        raise ValueError(f"{fmt} codes must lie in 0..{(1 << bits) - 1}")
    codes = codes.astype(np.uint8)
    packed = np.zeros((codes.shape[0], codes.shape[1] // per_byte), np.uint8)
    for slot in range(per_byte):
        packed |= codes[:, slot::per_byte] << (slot * bits)
    return packed


def dequantize_reference(
    packed: Any, fmt: str, scale: Any = None, zeros: Any = None, group_size: int = 128
) -> np.ndarray:
    """numpy decode of packed weights to float64 (N, K): the reference the kernels are tested on."""
    packed = np.asarray(packed, dtype=np.uint8)
    bits, per_byte = BITS[fmt], CODES_PER_BYTE[fmt]
    mask = (1 << bits) - 1
    codes = np.stack([(packed >> (slot * bits)) & mask for slot in range(per_byte)], axis=-1)
    w = values(fmt).astype(np.float64)[codes.reshape(packed.shape[0], -1)]
    if zeros is not None:
        w = w - np.repeat(np.asarray(zeros, dtype=np.float64), group_size, axis=1)
    if scale is not None:
        w = w * np.repeat(np.asarray(scale, dtype=np.float64), group_size, axis=1)
    return np.asarray(w)


def _decode(fmt: str, byte: Any, slot: Any, table: Any, dtype: str) -> Any:
    """The value of the code in bits ``slot * bits`` of the uint8 expression ``byte``."""
    bits = BITS[fmt]
    code = (byte >> T.cast(slot * bits, "uint8")) & T.uint8((1 << bits) - 1)
    if fmt in TABLES:
        return T.cast(table[T.cast(code, "int32")], dtype)
    half = 1 << (bits - 1)  # two's complement: (code ^ half) - half
    return T.cast(T.cast(code ^ T.uint8(half), "int32") - half, dtype)


def _dot_byte(fmt: str, byte: Any, a_slots: Any, b: Any, table: Any, dtype: str, zero: Any) -> Any:
    """``sum_s (value(code s of byte) - zero) * a_slots[s, b]`` over the codes of one byte."""
    total = None
    for slot in range(CODES_PER_BYTE[fmt]):
        value = _decode(fmt, byte, slot, table, dtype)
        if zero is not None:
            value = value - zero
        term = value * a_slots[slot, b]
        total = term if total is None else total + term
    return total


def _dot_byte_offset(fmt: str, byte: Any, a_slots: Any, a_fold: Any, b: Any, dtype: str, zero: Any) -> Any:
    """``_dot_byte`` for an integer format with the two's complement offset taken out of the codes.

    ``value = u - half`` with ``u = code ^ half`` in ``0 .. 2**bits - 1``, so the byte's term is
    ``sum_s u_s * a_s - (half + zero) * sum_s a_s``. ``a_fold[b]`` holds ``-half * sum_s a_s``
    (no zeros: the term is then a chain of fused multiply-adds starting from it) or ``sum_s a_s``
    (zeros: the term subtracts ``(half + zero)`` times it). A decoded code is then a conversion
    with no integer subtract, one instruction less per vector of codes.
    """
    bits = BITS[fmt]
    half, mask = 1 << (bits - 1), (1 << bits) - 1
    total = a_fold[b] if zero is None else -(zero + T.cast(half, dtype)) * a_fold[b]
    for slot in range(CODES_PER_BYTE[fmt]):
        code = (byte >> T.cast(slot * bits, "uint8")) & T.uint8(mask)
        total = total + T.cast(T.cast(code ^ T.uint8(half), "int32"), dtype) * a_slots[slot, b]
    return total


def dequant_kernel(
    M: int, N: int, K: int, fmt: str, group_size: int, has_scale: bool, has_zeros: bool,
    dtype: str, accum: str, tiling: Tiling,
) -> Any:
    """``(A, B, Table, Scale, Zeros) -> C``: C (M, N) = A (M, K) @ dequant(B).T.

    ``Scale``/``Zeros`` are (N, K // group_size), or (1, 1) placeholders the kernel does not read
    when ``has_scale``/``has_zeros`` is false; ``Table`` holds the code values (read by nf4, fp4).
    Several rows run the tiled GEMM body; one row (decoding) the GEMV body, which streams each
    packed byte once and does not use ``block_M`` or ``num_stages``. The GEMM body's K step is
    one group; the GEMV body's is ``tiling.block_K`` codes when that is a multiple of
    ``group_size`` dividing K (several groups per step, each code scaled where it is decoded),
    else one group (the group's sum scaled once). With several groups a step, the integer formats
    fold their two's complement offset into per-byte activation sums (``_dot_byte_offset``).
    ``tiling`` is ``configs.dequant_config``'s.
    """
    block_M, block_N, num_stages, threads = tiling.block_M, tiling.block_N, tiling.num_stages, tiling.threads
    per_byte, block_K, groups = CODES_PER_BYTE[fmt], group_size, K // group_size
    codes = 1 << BITS[fmt]

    @T.macro
    def gemm_body(A, B, Table, Scale, Zeros, C):  # type: ignore[no-untyped-def]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_local = T.alloc_fragment((block_N, block_K // per_byte), "uint8")
            table = T.alloc_shared((codes,), "float32")
            scale = T.alloc_fragment((block_N,), dtype)
            zero = T.alloc_fragment((block_N,), dtype)
            W_local = T.alloc_fragment((block_N, block_K), dtype)
            W_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum)
            T.copy(Table, table)
            T.clear(C_local)
            for k in T.Pipelined(groups, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * (block_K // per_byte)], B_local)
                if has_scale:
                    T.copy(Scale[bx * block_N : (bx + 1) * block_N, k], scale)
                if has_zeros:
                    T.copy(Zeros[bx * block_N : (bx + 1) * block_N, k], zero)
                for i, j in T.Parallel(block_N, block_K):
                    value = _decode(fmt, B_local[i, j // per_byte], j % per_byte, table, dtype)
                    if has_zeros:
                        value = value - zero[i]
                    if has_scale:
                        value = value * scale[i]
                    W_local[i, j] = value
                T.copy(W_local, W_shared)
                T.gemm(A_shared, W_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    # GEMV steps: ``step`` codes of every row per step, ``step_groups`` groups (``tiling.block_K``
    # when it is a multiple of the group that divides K, else one group)
    step = tiling.block_K if tiling.block_K % group_size == 0 and K % tiling.block_K == 0 else group_size
    step_groups, step_bytes, group_bytes = step // group_size, step // per_byte, group_size // per_byte
    steps = K // step

    one_group = step_groups == 1  # the GPU form: per-group fragments of one value per row
    # the CPU form of the integer formats: the two's complement offset folded into the activations
    fold_offset = not one_group and fmt not in TABLES
    half = 1 << (BITS[fmt] - 1)
    fold_factor = 1.0 if has_zeros else float(-half)  # a_fold: the byte's activation sum, times this

    def per_group(frag: Any, i: Any, b: Any) -> Any:
        """The value of (row ``i``, the group of byte ``b`` of the step) in a scale/zero fragment."""
        return frag[i] if one_group else frag[i, b // group_bytes]

    def byte_term(
        B_local: Any, a_slots: Any, a_fold: Any, table: Any, scale: Any, zero: Any, i: Any, b: Any
    ) -> Any:
        """Byte ``b`` of row ``i`` dotted with its activations; scaled here when a step has
        several groups (with one group, the group's sum is scaled once after the reduction)."""
        zero_point = per_group(zero, i, b) if has_zeros else None
        if fold_offset:
            term = _dot_byte_offset(fmt, B_local[i, b], a_slots, a_fold, b, accum, zero_point)
        else:
            term = _dot_byte(fmt, B_local[i, b], a_slots, b, table, accum, zero_point)
        return term * per_group(scale, i, b) if has_scale and not one_group else term

    def _byte_activations(A: Any, first: Any) -> Any:
        """The sum of the ``per_byte`` activations that meet the codes of one byte."""
        total = T.cast(A[0, first], accum)
        for s in range(1, per_byte):
            total = total + T.cast(A[0, first + s], accum)
        return total

    @T.macro
    def copy_groups(src, frag, k, bx):  # type: ignore[no-untyped-def]
        if one_group:
            T.copy(src[bx * block_N : (bx + 1) * block_N, k], frag)
        else:
            T.copy(src[bx * block_N, k * step_groups], frag)

    @T.macro
    def gemv_step(  # type: ignore[no-untyped-def]
        A, B, Scale, Zeros, a_slots, a_fold, B_local, scale, zero, partial, group_sum, y, table, k, bx
    ):
        T.copy(B[bx * block_N, k * step_bytes], B_local)
        for s, b in T.Parallel(per_byte, step_bytes):
            a_slots[s, b] = T.cast(A[0, k * step + b * per_byte + s], accum)
        if fold_offset:
            for b in T.Parallel(step_bytes):
                a_fold[b] = _byte_activations(A, k * step + b * per_byte) * T.cast(fold_factor, accum)
        if has_zeros:
            copy_groups(Zeros, zero, k, bx)
        if has_scale and not one_group:
            copy_groups(Scale, scale, k, bx)
        # one byte per element: its codes decoded with constant shifts, no gather of a
        for i, b in T.Parallel(block_N, step_bytes):
            partial[i, b] = byte_term(B_local, a_slots, a_fold, table, scale, zero, i, b)
        T.reduce_sum(partial, group_sum, dim=1)
        if has_scale and one_group:
            copy_groups(Scale, scale, k, bx)
            for i in T.Parallel(block_N):
                y[i] += group_sum[i] * scale[i]
        else:
            for i in T.Parallel(block_N):
                y[i] += group_sum[i]

    @T.macro
    def gemv_body(A, B, Table, Scale, Zeros, C):  # type: ignore[no-untyped-def]
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            # a_slots[s, b]: the activation that meets the code in slot s of byte b of the step;
            # shared, since every thread reads all slots of its bytes' columns
            a_slots = T.alloc_shared((per_byte, step_bytes), accum)
            # per byte: its activations' sum times fold_factor (unread without the offset fold)
            a_fold = T.alloc_shared((step_bytes,), accum) if fold_offset else a_slots
            B_local = T.alloc_fragment((block_N, step_bytes), "uint8")
            table = T.alloc_shared((codes,), "float32")
            scale = T.alloc_fragment((block_N,) if one_group else (block_N, step_groups), accum)
            zero = T.alloc_fragment((block_N,) if one_group else (block_N, step_groups), accum)
            partial = T.alloc_fragment((block_N, step_bytes), accum)
            group_sum = T.alloc_fragment((block_N,), accum)
            y = T.alloc_fragment((block_N,), accum)
            T.copy(Table, table)
            T.clear(y)
            if steps == 1:  # no loop: the row-wise nests fuse and their fragments shrink to a row
                gemv_step(A, B, Scale, Zeros, a_slots, a_fold, B_local, scale, zero, partial, group_sum, y,
                          table, 0, bx)
            else:
                for k in T.Pipelined(steps, num_stages=1):
                    gemv_step(A, B, Scale, Zeros, a_slots, a_fold, B_local, scale, zero, partial, group_sum,
                              y, table, k, bx)
            T.copy(y, C[0, bx * block_N : (bx + 1) * block_N])

    @T.prim_func
    def dequant_gemm(
        A: T.Tensor((M, K), dtype),  # type: ignore[valid-type]
        B: T.Tensor((N, K // per_byte), "uint8"),  # type: ignore[valid-type]
        Table: T.Tensor((codes,), "float32"),  # type: ignore[valid-type]
        Scale: T.Tensor((N, groups) if has_scale else (1, 1), dtype),  # type: ignore[valid-type]
        Zeros: T.Tensor((N, groups) if has_zeros else (1, 1), dtype),  # type: ignore[valid-type]
        C: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
    ):
        if M == 1:
            gemv_body(A, B, Table, Scale, Zeros, C)
        else:
            gemm_body(A, B, Table, Scale, Zeros, C)

    return dequant_gemm


dequant_gemm_kernel = dequant_kernel
"""The kernel for several activation rows (``dequant_kernel``)."""
dequant_gemv_kernel = functools.partial(dequant_kernel, 1)
"""``(N, K, fmt, ...)``: the kernel for one activation row (``dequant_kernel`` with M = 1)."""


def _placeholder(like: Any, given: Any) -> Any:
    if given is not None:
        return given
    if is_torch(like):
        return _torch_zeros(like.dtype, str(like.device))
    return _numpy_zeros(str(like.dtype))


def _table(fmt: str, like: Any) -> Any:
    if is_torch(like):
        return _torch_table(fmt, str(like.device))
    return _numpy_table(fmt)


# The kernels only read the code table and the (1, 1) placeholders, so a call reuses them: made
# per call, they cost a decode step's GEMV more host time than its launch.
@functools.cache
def _numpy_table(fmt: str) -> np.ndarray:
    return values(fmt)


@functools.cache
def _numpy_zeros(dtype: str) -> np.ndarray:
    return np.zeros((1, 1), dtype)


@functools.cache
def _torch_table(fmt: str, device: str) -> Any:
    import torch

    with torch.inference_mode(False):
        return torch.from_numpy(values(fmt)).to(device)


@functools.cache
def _torch_zeros(dtype: Any, device: str) -> Any:
    import torch

    with torch.inference_mode(False):
        return torch.zeros((1, 1), dtype=dtype, device=device)


@functools.lru_cache(maxsize=256)
def _tiling(target: str, m: int, k: int, group_size: int, bits: int) -> Tiling:
    return dequant_config(target_capabilities(target)[1], m, k, group_size, bits)


def run_dequant_matmul(
    a: Any, b_packed: Any, scale: Any, zeros: Any, fmt: str, group_size: int, target: str
) -> Any:
    """Launch ``dequant_kernel`` (its GEMV body for one activation row); returns (M, N)."""
    m, k = (int(s) for s in a.shape)
    n = int(b_packed.shape[0])
    dtype = dtype_name(a)
    # "auto" resolves to the current device, which may change between calls
    find = _tiling if target != "auto" else _tiling.__wrapped__
    tiling = find(target, m, k, group_size, BITS[fmt])
    flags = (fmt, group_size, scale is not None, zeros is not None)
    args = (a, b_packed, _table(fmt, a), _placeholder(a, scale), _placeholder(a, zeros))
    kernel = compiled(dequant_kernel, (-1,), target, m, n, k, *flags, dtype, accum_dtype(dtype), tiling)
    return kernel(*args)
