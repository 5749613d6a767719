"""Shared-memory layouts: the hardware XOR swizzles and padding.

The swizzle is the one TMA and wgmma apply to shared-memory byte addresses (PTX ISA
"Tensor swizzling modes"; gpu-isa-facts §4.4): with ``B = log2(span / 16)``,
``phys = addr ^ (((addr >> 7) & (2^B - 1)) << 4)``. It permutes the 16-byte chunks
of every ``span``-byte row (span = 32, 64 or 128 bytes) and repeats every 8 rows.

A tile ``(..., rows, cols)`` is stored as rows of ``span`` bytes: a row wider than
the span is cut into ``cols / span_elems`` column blocks stacked one after another
(the order TMA boxes and wgmma K-major atoms use). The layout's output is
``(physical_row, physical_col)`` over a ``(blocks * rows, span_elems)`` array.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from . import _tvm
from ._tvm import PrimExpr, Var
from .errors import LayoutError
from .layout import Layout, ShapeLike, normalize_shape, row_major_linearize, shape_ints

SWIZZLE_BYTES = (128, 64, 32)
"""The hardware swizzle spans, widest first."""

CHUNK_BYTES = 16
"""The swizzle permutes 16-byte chunks and never the bytes inside one."""

ATOM_ROWS = 8
"""One swizzle pattern covers 8 rows of ``span`` bytes (256, 512 or 1024 bytes)."""

_DTYPE_RE = re.compile(r"^(?:u?int|float|bfloat|tfloat|e\d?m\d|fp)(\d+)")


def dtype_bits(dtype: int | str) -> int:
    """Bits of one element: an int passes through, ``"float16"`` -> 16, ``"int8"`` -> 8."""
    if isinstance(dtype, int):
        bits = dtype
    else:
        text = str(dtype).lower()
        if text in ("tf32", "tfloat32"):
            return 32
        if text == "bool":  # stored one byte per element
            return 8
        found = _DTYPE_RE.match(text)
        if found is None:
            raise LayoutError(f"cannot tell the element width of dtype {dtype!r}", hint="pass dtype_bits=16")
        bits = int(found.group(1))
    if bits not in (8, 16, 32, 64):
        raise LayoutError(
            f"element width {bits} bits is not supported", hint="use 8, 16, 32 or 64-bit elements"
        )
    return bits


def _split_shape(shape: ShapeLike) -> tuple[list[int], int, int]:
    dims = shape_ints(normalize_shape(shape))
    if dims is None or len(dims) < 2:
        raise LayoutError(
            f"a shared-memory layout needs a constant shape of rank >= 2, got {list(shape)!r}",
            hint="pass e.g. [64, 64]",
        )
    return list(dims), math.prod(dims[:-1]), dims[-1]


class SwizzledLayout(Layout):
    """A shared-memory tile under a hardware XOR swizzle (an explicit-inverse Layout).

    Example::

        >>> from tile.layout import make_swizzled_layout
        >>> sw = make_swizzled_layout([64, 64], "float16")          # 128-byte rows
        >>> sw.swizzle_bytes, [int(e) for e in sw.map_forward_index([1, 0])]
        (128, [1, 8])
        >>> sw.is_bijective()
        True
    """

    swizzle_bytes: int
    element_bits: int

    def __init__(self, shape: ShapeLike, element_bits: int, swizzle_bytes: int) -> None:
        dims, rows, cols = _split_shape(shape)
        bits = dtype_bits(element_bits)
        if swizzle_bytes not in SWIZZLE_BYTES:
            raise LayoutError(
                f"swizzle span {swizzle_bytes} bytes is not a hardware mode",
                hint="use 32, 64 or 128 (or make_swizzled_layout to pick one)",
            )
        if (cols * bits) % (swizzle_bytes * 8) != 0:
            raise LayoutError(
                f"rows of {cols} x {bits}-bit elements are not a multiple of the {swizzle_bytes}-byte span",
                hint="pick a narrower swizzle, or make_swizzled_layout() to choose one",
            )
        if rows % ATOM_ROWS != 0:
            raise LayoutError(
                f"{rows} rows do not fill whole {ATOM_ROWS}-row swizzle atoms",
                hint="use a multiple of 8 rows, or a padded layout",
            )
        self.swizzle_bytes = swizzle_bytes
        self.element_bits = bits
        span = swizzle_bytes * 8 // bits
        chunk = CHUNK_BYTES * 8 // bits
        rows_per_xor = 128 // swizzle_bytes  # address bit 7 counts rows of `span` bytes
        phases = swizzle_bytes // CHUNK_BYTES

        def xor_of(phys_row: PrimExpr) -> PrimExpr:
            return _tvm.floormod(_tvm.floordiv(phys_row, rows_per_xor), phases)

        def forward(*v: Var) -> list[PrimExpr]:
            row = row_major_linearize(list(v[:-1]), [_tvm.const(d) for d in dims[:-1]])
            col = v[-1]
            phys_row = _tvm.floordiv(col, span) * rows + row
            moved = _tvm.bitwise_xor(_tvm.floordiv(_tvm.floormod(col, span), chunk), xor_of(phys_row))
            return [phys_row, moved * chunk + _tvm.floormod(col, chunk)]

        def inverse(phys_row: Var, phys_col: Var) -> list[PrimExpr]:
            block, row = _tvm.floordiv(phys_row, rows), _tvm.floormod(phys_row, rows)
            logical_chunk = _tvm.bitwise_xor(_tvm.floordiv(phys_col, chunk), xor_of(phys_row))
            col = block * span + logical_chunk * chunk + _tvm.floormod(phys_col, chunk)
            coords = []
            for extent in reversed(dims[:-1]):
                coords.append(_tvm.floormod(row, extent))
                row = _tvm.floordiv(row, extent)
            return [*reversed(coords), col]

        super().__init__(dims, forward, inverse_fn=inverse)

    def __repr__(self) -> str:
        return f"Swizzled{self.swizzle_bytes}B({self.element_bits}-bit) " + super().__repr__()


def make_swizzle_layout(shape: ShapeLike, dtype: int | str, swizzle_bytes: int) -> SwizzledLayout:
    """The ``swizzle_bytes`` (32/64/128) hardware swizzle of a ``(..., rows, cols)`` tile."""
    return SwizzledLayout(shape, dtype_bits(dtype), swizzle_bytes)


def make_padded_layout(shape: ShapeLike, pad: int) -> Layout:
    """Row-major layout whose rows are ``pad`` elements longer (a 1-D offset output).

    Not bijective: ``inverse_with_guard()`` gives the inverse and the predicate that
    excludes the padding.

    Example::

        >>> from tile.layout import make_padded_layout
        >>> p = make_padded_layout([4, 8], 1)
        >>> int(p.offset([2, 3])), p.is_bijective()
        (21, False)
    """
    dims = normalize_shape(shape)
    count = _tvm.as_int(pad)
    if count is None or count < 0:
        raise LayoutError(f"pad must be a non-negative int, got {pad!r}", hint="pass e.g. pad=8")
    if len(dims) < 2:
        raise LayoutError("padding needs a shape of rank >= 2", hint="pass (rows, cols)")
    padded = [*dims[:-1], dims[-1] + count]

    def forward(*v: Var) -> PrimExpr:
        return row_major_linearize(list(v), padded)

    return Layout(dims, forward)


def make_row_major_layout(shape: ShapeLike) -> Layout:
    """The identity layout: element ``(..., r, c)`` at ``(..., r, c)``."""
    return Layout(normalize_shape(shape), lambda *v: list(v))


def choose_swizzle_bytes(row_bytes: int, rows: int, max_swizzle_bytes: int = 128) -> int | None:
    """The widest hardware swizzle span that tiles rows of ``row_bytes`` bytes, or None."""
    if rows % ATOM_ROWS != 0:
        return None
    for span in SWIZZLE_BYTES:
        if span <= max_swizzle_bytes and row_bytes % span == 0:
            return span
    return None


def make_swizzled_layout(
    shape_or_buffer: ShapeLike | object,
    dtype: int | str | None = None,
    *,
    allow_padding: bool = False,
    max_swizzle_bytes: int = 128,
) -> Layout:
    """The widest legal swizzle for a shared tile; else padding or row-major.

    ``shape_or_buffer`` is a shape, or any object with ``.shape`` and ``.dtype``
    (a tvm buffer). When no swizzle fits (rows not a multiple of 32 bytes, or fewer
    than 8 rows), rows are padded by 16 bytes if ``allow_padding`` (which keeps
    ``ldmatrix`` free of bank conflicts, gpu-isa-facts §10) and otherwise left plain.
    """
    shape: Sequence[int | PrimExpr]
    if hasattr(shape_or_buffer, "shape"):
        shape = list(shape_or_buffer.shape)
        if dtype is None:
            dtype = str(getattr(shape_or_buffer, "dtype", ""))
    else:
        shape = shape_or_buffer  # type: ignore[assignment]
    if dtype is None:
        raise LayoutError("make_swizzled_layout needs the element type", hint="pass dtype='float16' or 16")
    bits = dtype_bits(dtype)
    dims, rows, cols = _split_shape(shape)
    row_bits = cols * bits
    span = choose_swizzle_bytes(row_bits // 8, rows, max_swizzle_bytes) if row_bits % 8 == 0 else None
    if span is not None:
        return SwizzledLayout(dims, bits, span)
    if allow_padding and row_bits % (CHUNK_BYTES * 8) == 0:
        return make_padded_layout(dims, CHUNK_BYTES * 8 // bits)
    return make_row_major_layout(dims)
