"""Hand-built wgmma shared-memory matrix descriptors (expert tier, CUDA sm_90a).

``T.alloc_wgmma_desc()`` is a per-thread 64-bit descriptor; ``T.initialize_wgmma_descriptor``
fills it as PTX's "Matrix Descriptor Format" says: the operand's shared-memory address
(bits 0-13, in 16-byte units), the leading and stride byte offsets (bits 16-29 and 32-45,
given here already in 16-byte units, as TileLang's callers pass them) and the swizzle mode
(bits 62-63: 0 none, 1 128B, 2 64B, 3 32B), through the CUDA backend's ``tile_wgmma_desc``.
``T.wgmma_mma`` is ``T.wgmma_gemm`` (TileLang defines it as the same function).
"""

from __future__ import annotations

from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from ..errors import TileTypeError
from .builtins import _alloc
from .compat_ops import wgmma_gemm

SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}
"""The descriptor's layout-type (swizzle) code -> swizzle width in bytes (PTX)."""

FIELD_MAX = (1 << 14) - 1
"""Leading/stride offsets are 14-bit fields (16-byte units)."""


def alloc_wgmma_desc(dtype: Any = "uint64") -> Any:
    """A wgmma matrix descriptor: one 64-bit register of the calling thread."""
    if str(dtype) != "uint64":
        raise TileTypeError(
            f"T.alloc_wgmma_desc: a wgmma descriptor is 64 bits, got {dtype}",
            hint="call T.alloc_wgmma_desc() without a dtype",
        )
    return _alloc("T.alloc_wgmma_desc", [1], "uint64", "local")


def _descriptor_element(descriptor: Any) -> Any:
    if tirx.is_buffer_var(descriptor):
        if len(descriptor.shape) != 1 or int(descriptor.shape[0]) != 1:
            raise TileTypeError(
                "T.initialize_wgmma_descriptor: the descriptor is a one-element buffer",
                hint="allocate it with desc = T.alloc_wgmma_desc()",
            )
        return descriptor, [0]
    if isinstance(descriptor, TensorLoad):
        return descriptor.source, list(descriptor.indices)
    raise TileTypeError(
        f"T.initialize_wgmma_descriptor takes a descriptor buffer, got {type(descriptor).__name__}",
        hint="allocate it with desc = T.alloc_wgmma_desc()",
    )


def _address(start: Any) -> Any:
    if tirx.is_buffer_var(start):
        return tirx.address_of(start[tuple(0 for _ in start.shape)])
    if isinstance(start, TensorLoad):
        return tirx.address_of(start)
    if isinstance(start, ir.Expr):  # a pointer: T.access_ptr(...), A_shared.data
        return start
    raise TileTypeError(
        f"T.initialize_wgmma_descriptor: the start address must be a shared buffer or a pointer, "
        f"got {type(start).__name__}",
        hint="pass A_shared, A_shared[i, k] or T.access_ptr(A_shared[i, k])",
    )


def initialize_wgmma_descriptor(
    descriptor: Any,
    start_address: Any,
    layout_type_: int = 0,
    leading_byte_offset: int = 0,
    stride_byte_offset: int = 0,
) -> None:
    """Fill ``descriptor`` for the shared-memory operand at ``start_address``."""
    if layout_type_ not in SWIZZLE_BYTES:
        raise TileTypeError(
            f"T.initialize_wgmma_descriptor: layout type {layout_type_!r} is not a wgmma swizzle mode",
            hint="use 0 (none), 1 (128B swizzle), 2 (64B) or 3 (32B)",
        )
    for name, value in (("leading", leading_byte_offset), ("stride", stride_byte_offset)):
        if not isinstance(value, int) or not 0 <= value <= FIELD_MAX:
            raise TileTypeError(
                f"T.initialize_wgmma_descriptor: the {name} byte offset {value!r} does not fit the "
                "descriptor's 14-bit field (16-byte units)",
                hint="pass the offset in bytes divided by 16, from 0 to 16383",
            )
    buffer, indices = _descriptor_element(descriptor)
    value = tirx.call_extern(
        "uint64",
        "tile_wgmma_desc",
        _address(start_address),
        tirx.const(leading_byte_offset * 16, "uint32"),
        tirx.const(stride_byte_offset * 16, "uint32"),
        tirx.const(SWIZZLE_BYTES[layout_type_], "int32"),
    )
    B.buffer_store(buffer, value, indices)


wgmma_mma = wgmma_gemm


WGMMA_N = (8, 16, 32, 64, 96, 128, 192, 256)
"""The N of ``m64nNk16`` the CUDA backend's wgmma helpers define."""
_OPERAND_TYPES = {"fp16": "f16", "bf16": "bf16"}


def _buffer_of_data(value: Any) -> Any:
    """``X`` for ``X.data`` (TileLang passes buffers' data pointers), else ``value``."""
    if isinstance(value, ir.Call) and getattr(value.op, "name", "") == "tirx.buffer_data":
        return value.args[0]
    return value


def _descriptor_value(descriptor: Any, offset: Any) -> Any:
    descriptor = _buffer_of_data(descriptor)
    if tirx.is_buffer_var(descriptor):
        value = tirx.BufferLoad(descriptor, [0])
    elif isinstance(descriptor, TensorLoad):
        value = descriptor
    else:
        raise TileTypeError(
            f"T.ptx_wgmma_ss takes descriptors from T.alloc_wgmma_desc, got {type(descriptor).__name__}",
            hint="pass desc_a (or desc_a.data) after T.initialize_wgmma_descriptor(desc_a, ...)",
        )
    return value + tirx.Cast("uint64", offset)


def _accumulator_address(C: Any, offset: Any) -> Any:
    C = _buffer_of_data(C)
    if not tirx.is_buffer_var(C) or str(C.dtype) != "float32":
        raise TileTypeError(
            "T.ptx_wgmma_ss accumulates into a float32 register buffer",
            hint="C_local = T.alloc_local((N // 2,), 'float32') and pass C_local (or C_local.data)",
        )
    return tirx.address_of(tirx.BufferLoad(C, [offset]))


def ptx_wgmma_ss(
    dtype: Any,
    wgmma_prefix: str,
    a_is_k_major: Any,
    b_is_k_major: Any,
    a_dtype_abbrv: str,
    b_dtype_abbrv: str,
    accum_dtype_abbrv: str,
    A_desc: Any,
    A_offset: Any,
    B_desc: Any,
    B_offset: Any,
    C_data: Any,
    C_offset: Any,
    scale_out: Any = True,
    scale_in_a: Any = 1,
    scale_in_b: Any = 1,
) -> None:
    """One ``wgmma.mma_async`` ``m64nNk16`` with A and B in shared memory (by descriptors,
    each plus its offset in 16-byte units) into the thread's float32 accumulators at
    ``C_data[C_offset]``; ``scale_out`` false overwrites them. Issue it between
    ``T.warpgroup_arrive()`` and ``T.warpgroup_commit_batch()``; ``T.warpgroup_wait(0)``
    before reading ``C``."""
    shape = str(wgmma_prefix)
    n = (
        int(shape[4:-3])
        if shape.startswith("m64n") and shape.endswith("k16") and shape[4:-3].isdigit()
        else 0
    )
    if n not in WGMMA_N:
        raise TileTypeError(
            f"T.ptx_wgmma_ss: shape {wgmma_prefix!r} is not one tile issues",
            hint=f"use m64nNk16 with N in {', '.join(map(str, WGMMA_N))} (16-bit operands)",
        )
    operand = _OPERAND_TYPES.get(str(a_dtype_abbrv))
    if operand is None or a_dtype_abbrv != b_dtype_abbrv or accum_dtype_abbrv != "fp32":
        raise TileTypeError(
            f"T.ptx_wgmma_ss: {a_dtype_abbrv} x {b_dtype_abbrv} -> {accum_dtype_abbrv} "
            "is not a form tile issues",
            hint="use fp16 or bf16 operands (both the same) with fp32 accumulators, or T.gemm otherwise",
        )
    if any(not isinstance(s, int | bool) or int(s) != 1 for s in (scale_in_a, scale_in_b)):
        raise TileTypeError(
            "T.ptx_wgmma_ss: tile's wgmma does not negate operands (scale_in_a/scale_in_b = 1 only)",
            hint="negate the operand tile before the wgmma instead",
        )
    trans_a = 0 if _static_bool(a_is_k_major) else 1
    trans_b = 0 if _static_bool(b_is_k_major) else 1
    B.evaluate(
        tirx.call_extern(
            "void",
            f"tile_wgmma_m64n{n}k16_ss_{operand}_f32<{trans_a}, {trans_b}>",
            _accumulator_address(C_data, C_offset),
            _descriptor_value(A_desc, A_offset),
            _descriptor_value(B_desc, B_offset),
            tirx.Cast("int32", scale_out),
        )
    )


def _static_bool(value: Any) -> bool:
    if isinstance(value, bool | int):
        return bool(value)
    if isinstance(value, tirx.IntImm):
        return bool(value.value)
    raise TileTypeError(
        "T.ptx_wgmma_ss: a_is_k_major / b_is_k_major must be constants",
        hint="pass True or False (T.bool(True) also works)",
    )
