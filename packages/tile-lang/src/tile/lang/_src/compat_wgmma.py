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
