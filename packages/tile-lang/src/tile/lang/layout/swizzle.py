"""``tilelang.layout.swizzle``: shared-memory swizzles and fragment helpers, TileLang's names.

Each takes what TileLang's does: a buffer (or a load/region of one: ``A_shared``,
``A_shared[0, 0]``), read for its shape and dtype. A tile of more than two dims is laid out
as its last two dims, the same for every index of the leading ones (``expand``), as TileLang
does for a stage-indexed shared tile.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any, NoReturn

from tile.ir.errors import TileTypeError, UnsupportedOnTargetError
from tile.layout import (
    Fragment,
    Layout,
    choose_swizzle_bytes,
    dtype_bits,
    make_fully_replicated,
    make_row_major_layout,
    make_swizzle_layout,
)
from tile.layout import make_swizzled_layout as _make_swizzled_layout
from tile.layout.hardware import ldmatrix_fragment

from .._src.session import current_location


def _buffer(obj: Any, what: str) -> Any:
    """The buffer behind ``obj`` (a buffer, a load of one, a region of one)."""
    for candidate in (obj, getattr(obj, "buffer", None), getattr(obj, "source", None)):
        if candidate is not None and hasattr(candidate, "shape") and hasattr(candidate, "dtype"):
            return candidate
    raise TileTypeError(
        f"{what} takes a buffer, got {type(obj).__name__}",
        hint=f"pass the shared tile itself: {what}(A_shared)",
        location=current_location(),
    )


def _shape(buffer: Any, what: str) -> list[int]:
    try:
        return [int(d) for d in buffer.shape]
    except (TypeError, ValueError):
        raise TileTypeError(
            f"{what} needs a tile of constant shape, got {list(buffer.shape)}",
            hint="give the shared tile constant extents",
            location=current_location(),
        ) from None


def _per_tile(shape: Sequence[int], inner: Layout) -> Layout:
    """``inner`` (a layout of the last two dims) for every index of the leading dims."""
    return inner.expand(list(shape[:-2])) if len(shape) > 2 else inner


def _bank_swizzle(
    buffer: Any, swizzle_bytes: int, what: str, cols: Any = None, element_bits: Any = None
) -> Layout:
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        # (rows, cols, element_bits): a tile described by its sizes, as TileLang's layout plots do
        if not isinstance(cols, int) or not isinstance(element_bits, int):
            raise TileTypeError(
                f"{what}({buffer}, {cols!r}, {element_bits!r}): the sizes form takes rows, columns "
                "and the element's width in bits",
                hint=f"write {what}(8, 64, 16) for an 8 x 64 tile of 16-bit elements, or pass a shared tile",
            )
        return make_swizzle_layout([buffer, cols], element_bits, swizzle_bytes)
    buf = _buffer(buffer, what)
    shape = _shape(buf, what)
    if len(shape) < 2:
        raise TileTypeError(
            f"{what} lays out a tile of rows and columns, got shape {shape}",
            hint="pass a 2-d (or stage-indexed 3-d) shared tile",
            location=current_location(),
        )
    return _per_tile(shape, make_swizzle_layout(shape[-2:], str(buf.dtype), swizzle_bytes))


def make_full_bank_swizzled_layout(buffer: Any, cols: Any = None, element_bits: Any = None) -> Layout:
    """The 128-byte XOR swizzle (PTX's 128B mode) of a shared tile with 128-byte row multiples;
    also ``(rows, cols, element_bits)``: the swizzle of a tile of that size."""
    return _bank_swizzle(buffer, 128, "make_full_bank_swizzled_layout", cols, element_bits)


def make_half_bank_swizzled_layout(buffer: Any, cols: Any = None, element_bits: Any = None) -> Layout:
    """The 64-byte XOR swizzle (PTX's 64B mode) of a shared tile (or of ``(rows, cols, element_bits)``)."""
    return _bank_swizzle(buffer, 64, "make_half_bank_swizzled_layout", cols, element_bits)


def make_quarter_bank_swizzled_layout(buffer: Any, cols: Any = None, element_bits: Any = None) -> Layout:
    """The 32-byte XOR swizzle (PTX's 32B mode) of a shared tile (or of ``(rows, cols, element_bits)``)."""
    return _bank_swizzle(buffer, 32, "make_quarter_bank_swizzled_layout", cols, element_bits)


def make_linear_layout(buffer_or_load_or_region: Any) -> Layout:
    """The row-major (identity) layout of a tile of any rank."""
    buf = _buffer(buffer_or_load_or_region, "make_linear_layout")
    return make_row_major_layout(list(buf.shape))


def make_swizzled_layout(
    buffer: Any, k_major: Any = True, allow_pad: bool | None = None, **kwargs: Any
) -> Layout:
    """The widest swizzle that fits a shared tile (``tile.layout.make_swizzled_layout``).

    Takes TileLang's form ``make_swizzled_layout(A_shared, k_major=True, allow_pad=True)``
    and tile's ``make_swizzled_layout(shape, dtype, allow_padding=False)``: a second
    positional argument that is a dtype (a string or a bit width) is tile's. ``k_major``
    does not change the layout here: the swizzle is a function of a stored element's row
    and column whichever of them is K. Unlike TileLang, a tile no swizzle fits stays
    row-major unless ``allow_pad=True`` is passed (padding changes only speed).
    """
    if isinstance(k_major, str) or (isinstance(k_major, int) and not isinstance(k_major, bool)):
        kwargs.setdefault("dtype", k_major)  # tile's (shape, dtype) form
    if allow_pad is not None:
        kwargs.setdefault("allow_padding", bool(allow_pad))
    return _make_swizzled_layout(buffer, **kwargs)


def make_wgmma_swizzled_layout(
    buffer: Any, continuity: int | None = None, k_major: bool = True
) -> Layout:
    """The widest swizzle whose span divides ``continuity`` elements (default: a row) and a row.

    This is the layout a warpgroup MMA reads through its shared-memory descriptor (PTX's
    128B, 64B, 32B modes, or none). ``k_major`` does not change it (see
    ``make_swizzled_layout``).
    """
    what = "make_wgmma_swizzled_layout"
    buf = _buffer(buffer, what)
    shape = _shape(buf, what)
    if len(shape) < 2:
        return make_row_major_layout(shape)
    rows, cols = shape[-2:]
    bits = dtype_bits(str(buf.dtype))
    run = cols if continuity is None or continuity < 0 else int(continuity)
    span = None
    if (run * bits) % 8 == 0 and (cols * bits) % 8 == 0:  # a span must divide the run and the row
        span = choose_swizzle_bytes(math.gcd(run * bits // 8, cols * bits // 8), rows)
    if span is None:
        return make_row_major_layout(shape)
    return _per_tile(shape, make_swizzle_layout([rows, cols], str(buf.dtype), span))


def make_gemm_fragment_8x8() -> Fragment:
    """The 8x8 tile of 16-bit elements one ``ldmatrix`` matrix gives a warp.

    Lane ``4 r + c`` holds row ``r``, columns ``2 c`` and ``2 c + 1`` (locals 0, 1).
    """
    return ldmatrix_fragment(1)


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """The 8x8 tile ``ldmatrix ... .trans`` gives.

    Lane ``4 c + r`` holds column ``c``, rows ``2 r`` and ``2 r + 1`` (locals 0, 1).
    """
    return ldmatrix_fragment(1, trans=True)


def make_fully_replicated_layout_fragment(buffer: Any, threads: int) -> Fragment:
    """Every one of ``threads`` threads holds the whole tile (``tile.layout.make_fully_replicated``)."""
    buf = _buffer(buffer, "make_fully_replicated_layout_fragment")
    return make_fully_replicated(_shape(buf, "make_fully_replicated_layout_fragment"), int(threads))


def _refuse(name: str, why: str, hint: str) -> NoReturn:
    raise UnsupportedOnTargetError(f"{name} {why}", hint=hint, location=current_location())


def make_volta_swizzled_layout(buffer: Any, is_a: bool = True, k_inner: bool = True) -> NoReturn:
    """Refused: Volta's (sm_70) mma operand layouts; tile targets sm_80 and later."""
    _refuse(
        "make_volta_swizzled_layout",
        "lays out operands for Volta's mma (sm_70); tile targets sm_75-sm_90a and gfx90a",
        "use make_swizzled_layout(A_shared), or leave the layout to T.gemm",
    )


def make_tcgen05mma_swizzled_layout(
    buffer: Any, continuity: int | None = None, k_major: bool = True
) -> NoReturn:
    """Refused: Blackwell's tcgen05 operand layouts (sm_100)."""
    _refuse(
        "make_tcgen05mma_swizzled_layout",
        "lays out operands for Blackwell's tcgen05 MMA (sm_100); tile targets sm_75-sm_90a and gfx90a",
        "use make_wgmma_swizzled_layout(A_shared) for sm_90a, or leave the layout to T.gemm",
    )


def make_cutlass_metadata_layout(buffer: Any, mma_dtype: Any = None, arch: Any = None, **_: Any) -> NoReturn:
    """Refused: tile's ``T.gemm_sp`` reads its metadata in TileLang's ordered layout, not CUTLASS's."""
    _refuse(
        "make_cutlass_metadata_layout",
        "reorders 2:4 sparse metadata for CUTLASS's sparse tensor-core kernels, which tile's "
        "T.gemm_sp does not use (it expands A into a dense tile)",
        "leave the metadata tile without T.annotate_layout",
    )


class SwizzleMode(enum.Enum):
    """A shared-memory swizzle mode, with its descriptor codes (PTX ISA, wgmma matrix descriptor)."""

    NONE = 0
    SWIZZLE_32B = 32
    SWIZZLE_64B = 64
    SWIZZLE_128B = 128

    def is_none(self) -> bool:
        return self is SwizzleMode.NONE

    def is_swizzle_32b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_32B

    def is_swizzle_64b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_64B

    def is_swizzle_128b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_128B

    def wgmma_layout_type(self) -> int:
        """The wgmma descriptor's swizzle field (bits 62-63): none 0, 128B 1, 64B 2, 32B 3."""
        return {0: 0, 128: 1, 64: 2, 32: 3}[self.value]

    def tcgen05_layout_type(self) -> NoReturn:
        _refuse(
            "SwizzleMode.tcgen05_layout_type",
            "is a field of Blackwell's tcgen05 descriptor (sm_100); tile targets sm_75-sm_90a and gfx90a",
            "use wgmma_layout_type() for sm_90a",
        )

    def swizzle_byte_size(self) -> int:
        """The swizzle span in bytes (1 for none)."""
        return self.value or 1

    def swizzle_atom_size(self) -> int:
        """The span in 16-byte chunks (1 for none)."""
        return self.value // 16 if self.value else 1

    def smem_alignment(self) -> int:
        """The shared-memory base alignment the mode needs: the swizzle pattern's repeat
        (8 rows of the span: 256, 512, 1024 bytes), 128 bytes without one (TMA's minimum)."""
        return self.value * 8 if self.value else 128

    @staticmethod
    def from_ordinal(ordinal: int) -> SwizzleMode:
        """The mode by its position: 0 none, 1 32B, 2 64B, 3 128B."""
        modes = list(SwizzleMode)
        if not 0 <= int(ordinal) < len(modes):
            raise TileTypeError(f"SwizzleMode.from_ordinal: no mode {ordinal}", hint="pass 0, 1, 2 or 3")
        return modes[int(ordinal)]
