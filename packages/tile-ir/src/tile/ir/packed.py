"""Tensors of sub-byte element types (``T.float4_e2m1fn``, ``int4``, ``uint4``) passed as
their packed storage: bytes, ``8 // bits`` codes each, along the last dim.

TileLang's rule for such an argument (a ``uint8``/``int8`` tensor, or torch's
``float4_e2m1fn_x2``): its last dim counts bytes, ``8 // bits`` logical elements each, and its
other dims are the logical ones; its element strides are bytes, so a logical stride is the
byte stride times ``8 // bits`` except along the last dim, which must be 1 (two codes share
a byte: a column cannot be sliced out).

Example::

    >>> from tile.ir.packed import packed_view
    >>> packed_view("float4_e2m1fn", "uint8", (4, 8), (16, 1))
    ((4, 16), (32, 1))
    >>> packed_view("float16", "uint8", (4, 8), (8, 1)) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm  # type: ignore[import-untyped]

STORAGE_DTYPES = frozenset({"uint8", "int8", "float4_e2m1fn_x2"})
"""Element types of a tensor that holds packed sub-byte codes (torch's fp4 pair type included)."""


def subbyte_bits(dtype: str) -> int | None:
    """The bits of one element of ``dtype`` when fewer than 8, else None."""
    try:
        data = tvm.DataType(dtype)
    except (ValueError, TypeError, RuntimeError):
        return None
    bits = int(data.bits)
    return bits if int(data.lanes) == 1 and 0 < bits < 8 and 8 % bits == 0 else None


def packed_view(
    declared: str, dtype: str, shape: Sequence[int], strides: Sequence[int] | None = None
) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """``(logical shape, logical element strides)`` of a ``dtype`` tensor of ``shape`` (and byte
    ``strides``) passed for a ``declared`` sub-byte parameter; None where it is not that
    parameter's packed storage (another dtype, a scalar, a last-dim stride other than 1)."""
    bits = subbyte_bits(declared)
    if bits is None or dtype not in STORAGE_DTYPES or not len(shape):
        return None
    per_byte = 8 // bits
    logical = (*(int(d) for d in shape[:-1]), int(shape[-1]) * per_byte)
    if strides is None:
        return logical, None
    if len(strides) != len(shape) or (int(shape[-1]) > 1 and int(strides[-1]) != 1):
        return None
    return logical, (*(int(s) * per_byte for s in strides[:-1]), 1)
