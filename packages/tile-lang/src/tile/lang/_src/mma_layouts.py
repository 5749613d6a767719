"""Where each lane's data of a warp matrix instruction lives (PTX ``mma.m16n8k*`` and
``ldmatrix``), as index functions for hand-written MMA code (``tile.lang.cuda.intrinsics``).

Conventions follow the PTX ISA's "Matrix Fragments for mma.m16n8k*": ``g = lane // 4``
(the group) and ``t = lane % 4`` (the thread in the group). A lane's local index ``e``
numbers the fragment elements ``a_e`` / ``b_e`` / ``c_e``. An operand tile of one
emitter step is 16 rows (M or N) by ``k`` columns; the B tile of two ``n8`` instructions
keeps the first instruction's elements in local ``0 .. len/2`` and the second's after.

``ldmatrix`` row addresses: lane ``l`` names row ``l % 8`` of matrix ``l // 8``, and
register ``q`` of the fragment receives matrix ``q``; the functions here place the
matrices so that register ``q`` holds ``a_{2q}, a_{2q+1}`` (16-bit) or ``a_{4q..4q+3}``
(8-bit) of the PTX fragment.
"""

from __future__ import annotations

from typing import Any

from tile.layout import Layout, dtype_bits
from tile.layout.swizzle import make_row_major_layout, make_swizzled_layout

from ..errors import TileTypeError

EIGHT_BIT_OPERANDS = frozenset({"int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"})


def _bits(dtype: Any) -> int:
    from .dtypes import dtype_name

    return dtype_bits(dtype_name(dtype))


def get_swizzle_layout(
    row_idx: Any, col_idx: Any, row_size: Any, dtype: Any, swizzle_bytes: int | None = None
) -> tuple[Any, Any, Any]:
    """``(span, row, column)`` of element ``(row_idx, col_idx)`` of a shared tile whose rows
    hold ``row_size`` elements, stored as spans of ``swizzle_bytes`` (default: the row's bytes,
    at most 128) in which the 16-byte chunks of row ``r`` are XOR-permuted by the row's phase
    (``r % 8`` for 128-byte spans, ``r % 8 // 2`` for 64, ``r % 8 // 4`` for 32), so the 8
    rows one ``ldmatrix`` matrix reads sit in different banks.

    Example::

        >>> get_swizzle_layout(1, 0, 64, "float16")   # row 1, chunk 0 -> chunk 1
        (0, 1, 8)
    """
    bits = _bits(dtype)
    row_bytes = int(row_size) * bits // 8
    if row_bytes % 32:
        raise TileTypeError(
            f"get_swizzle_layout: a row of {row_size} {dtype} elements is {row_bytes} bytes, "
            "not a multiple of 32",
            hint="swizzle tiles whose rows are 32, 64, 128... bytes, or leave the layout row-major",
        )
    span = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    if span not in (32, 64, 128) or row_bytes % span:
        raise TileTypeError(
            f"get_swizzle_layout: rows of {row_bytes} bytes cannot be cut into {span}-byte swizzle spans",
            hint="swizzle rows of 32, 64 or a multiple of 128 bytes (or pass swizzle_bytes=32/64/128 "
            "dividing the row)",
        )
    per_chunk = 128 // bits  # elements in 16 bytes
    chunks = span // 16
    chunk, within = col_idx // per_chunk, col_idx % per_chunk
    phase = (row_idx % 8) // (8 // chunks)
    return chunk // chunks, row_idx, ((chunk % chunks) ^ phase) * per_chunk + within


def ldmatrix_lane_offset(
    operand: str, lane: Any, dtype: Any, transposed: bool, num: int = 4
) -> tuple[Any, Any]:
    """``(row, column)`` within the stored operand tile of the row lane ``lane`` gives
    ``ldmatrix`` (16-bit operands; 8-bit ones where the stored rows run along K).

    The stored tile is A as ``[M][K]`` (``[K][M]`` when ``transposed``) and B as ``[K][N]``
    (``[N][K]`` when ``transposed``), TileLang's convention: ``b_transposed`` is the
    "NT" GEMM, B stored N-major with K contiguous.
    """
    bits = _bits(dtype)
    if operand not in ("A", "B"):
        raise TileTypeError(f"operand {operand!r}", hint='pass "A" or "B"')
    k_contiguous = (operand == "A") != transposed  # A [M][K] or B [N][K]
    if bits == 8 and not k_contiguous:
        raise TileTypeError(
            "ldmatrix cannot transpose 8-bit elements: an 8-bit operand is loaded with ldmatrix "
            "only when K is its contiguous dimension (A [M][K], B [N][K])",
            hint="use the element-wise loads (mma_load_offset), as the emitter does",
        )
    if bits not in (8, 16):
        raise TileTypeError(
            f"ldmatrix moves 8- and 16-bit operands, not {dtype}", hint="use float16, bfloat16 or int8"
        )
    chunk = 128 // bits  # elements of one 16-byte matrix row
    lane = lane % (8 * num)
    matrix, row = lane // 8, lane % 8
    if operand == "A" and not transposed:  # matrices: (m0, k0) (m8, k0) (m0, k8) (m8, k8)
        return row + 8 * (matrix % 2), chunk * (matrix // 2)
    if operand == "B" and not transposed:  # stored [K][N], .trans: (k0, n0) (k8, n0) (k0, n8) (k8, n8)
        return row + 8 * (matrix % 2), 8 * (matrix // 2)
    if operand == "A":  # stored [K][M], .trans: (k0, m0) (k0, m8) (k8, m0) (k8, m8)
        return row + 8 * (matrix // 2), 8 * (matrix % 2)
    # B stored [N][K]: (n0, k0) (n0, k8) (n8, k0) (n8, k8)
    return row + 8 * (matrix // 2), chunk * (matrix % 2)


def mma_a_element(lane: Any, e: Any, k: int) -> tuple[Any, Any]:
    """``(m, k)`` of fragment element ``a_e`` of lane ``lane`` (m16n8k16 16-bit, m16n8k32 8-bit)."""
    g, t = lane // 4, lane % 4
    if k == 16:
        return g + 8 * (e // 2 % 2), 2 * t + e % 2 + 8 * (e // 4)
    return g + 8 * (e // 4 % 2), 4 * t + e % 4 + 16 * (e // 8)


def mma_b_element(lane: Any, e: Any, k: int) -> tuple[Any, Any]:
    """``(k, n)`` of fragment element ``b_e`` of lane ``lane`` (one n8 instruction)."""
    g, t = lane // 4, lane % 4
    if k == 16:
        return 2 * t + e % 2 + 8 * (e // 2), g
    return 4 * t + e % 4 + 16 * (e // 4), g


def mma_c_element(lane: Any, e: Any) -> tuple[Any, Any]:
    """``(m, n)`` of accumulator element ``c_e`` of lane ``lane`` in a 16x16 tile of two n8
    instructions (``e`` in 0..7: the second instruction's from 4)."""
    g, t = lane // 4, lane % 4
    return g + 8 * (e % 4 // 2), 8 * (e // 4) + 2 * t + e % 2


def mma_store_index_map(thread_id: Any, local_id: Any) -> tuple[Any, Any]:
    """TileLang's name: ``(row, column)`` in a 16x16 accumulator tile of ``local_id`` of
    ``thread_id`` (``mma_c_element``)."""
    return mma_c_element(thread_id, local_id)


def get_ldmatrix_offset(
    matrix: str, row_idx: Any, col_idx: Any, stride: Any, dtype: Any = "float16", transposed: bool = False
) -> tuple[Any, Any]:
    """TileLang's name: ``(row, column)`` of the row lane ``row_idx`` hands ``ldmatrix`` for
    operand ``matrix`` (``col_idx`` is added to the column; ``stride`` is not needed)."""
    row, col = ldmatrix_lane_offset(matrix, row_idx, dtype, transposed)
    return row, col + col_idx


def make_mma_swizzle_layout(shared_buf: Any, is_smooth: bool = False) -> Layout:
    """The swizzled layout of a shared-memory MMA operand tile (row-major when ``is_smooth``):
    tile's hardware XOR swizzle, the widest span (32/64/128 bytes) the rows fill,
    row-major where none fits.

    Example::

        T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared)})
    """
    if is_smooth:
        return make_row_major_layout(list(shared_buf.shape))
    return make_swizzled_layout(shared_buf)


def get_mma_micro_size(dtype: Any) -> tuple[int, int, int]:
    """``(micro_m, micro_n, micro_k)`` of the tensor-core tile for operands of ``dtype``
    (m16n8k16 for 16-bit operands, k32 for 8-bit ones; n is 16, a pair of n8 instructions).

    Example::

        >>> get_mma_micro_size("float16"), get_mma_micro_size("int8")
        ((16, 16, 16), (16, 16, 32))
    """
    return (16, 16, 32 if str(dtype) in EIGHT_BIT_OPERANDS else 16)
