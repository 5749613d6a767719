"""NVIDIA warp and warpgroup register fragments, grown from the ldmatrix 8x16-byte base.

Each fragment maps a logical operand tile (A: ``(m, k)``, B: ``(k, n)``, C/D:
``(m, n)``) to ``(lane or thread, element number)``; the element number is the
PTX fragment element index (``a_i``, ``b_i``, ``c_i``), so register ``i // k``
holds it in sub-position ``i % k`` for ``k`` elements per 32-bit register.
Sources: PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k32 / m16n8k8",
"ldmatrix", "Matrix Fragments for wgmma.mma_async.m64nNk16".
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from ..errors import LayoutError
from ..fragment import Fragment
from ..swizzle import dtype_bits
from ._base import OperandBuilder, col_fragment, operand_builders, row_fragment

WARP_SIZE = 32
WARPGROUP_WARPS = 4

Operand = Literal["A", "B", "C"]


def _check_dtype(dtype: int | str, allowed: tuple[int, ...], what: str) -> None:
    bits = dtype_bits(dtype)
    if bits not in allowed:
        raise LayoutError(
            f"{what} takes {'/'.join(map(str, allowed))}-bit inputs, not {dtype!r}",
            hint="use mma_fragment() to pick the shape that fits the dtype",
        )


def ldmatrix_fragment(num: int = 1, trans: bool = False) -> Fragment:
    """Destination of ``ldmatrix.sync.aligned.m8n8.x{num}[.trans].b16``.

    The tile is ``(8 * num, 8)`` in shared-memory row order: matrix ``q`` is rows
    ``8q .. 8q+7`` (the rows lanes ``8q .. 8q+7`` point at); local ``2q + h`` is
    half ``h`` of destination register ``r_q``.
    """
    if num not in (1, 2, 4):
        raise LayoutError(f"ldmatrix loads 1, 2 or 4 matrices, not {num}", hint="use num=1, 2 or 4")
    base = col_fragment(16) if trans else row_fragment(16)
    return base if num == 1 else base.repeat([num, 1])


def mma_m16n8_c() -> Fragment:
    """C/D of every ``mma.m16n8k*`` (f32 or s32): 16x8, ``c0..c3``."""
    return row_fragment(16).repeat([2, 1])


MMA_SYNC = {
    # input bits: (instruction, the dtype its builders default to, the inputs it takes)
    16: ("m16n8k16", "float16", "f16/bf16"),
    8: ("m16n8k32", "int8", "s8/u8, also e4m3/e5m2"),
    32: ("m16n8k8", "tf32", "tf32"),
}
"""The ``mma.sync`` shape for each input width. Every one grows from the ldmatrix base of
its width: A (16 x K) is 2 x 2 blocks of :func:`row_fragment` (ldmatrix.x4 of its four
8-row blocks; the row half alternates first), B (K x 8) 2 x 1 blocks of :func:`col_fragment`."""


def _mma_sync_operand(bits: int, operand: Literal["A", "B"], dtype: int | str) -> Fragment:
    _check_dtype(dtype, (bits,), f"mma.{MMA_SYNC[bits][0]}")
    return row_fragment(bits).repeat([2, 2]) if operand == "A" else col_fragment(bits).repeat([2, 1])


def _mma_sync_builders(bits: int) -> tuple[OperandBuilder, OperandBuilder]:
    shape, default, inputs = MMA_SYNC[bits]
    k = 256 // bits
    docs = (
        f"A of ``mma.{shape}`` ({inputs}): 16x{k}, ``a0..a{k // 2 - 1}``.",
        f"B of ``mma.{shape}`` ({inputs}): {k}x8 ``(k, n)``, ``b0..b{k // 4 - 1}``.",
    )
    return operand_builders(f"mma_{shape}", default, partial(_mma_sync_operand, bits), docs)


mma_m16n8k16_a, mma_m16n8k16_b = _mma_sync_builders(16)
mma_m16n8k32_a, mma_m16n8k32_b = _mma_sync_builders(8)
mma_m16n8k8_a, mma_m16n8k8_b = _mma_sync_builders(32)


def dmma_m16n8k4_operand(operand: Literal["A", "B"]) -> Fragment:
    """A (16x4) or B (4x8) of two stacked ``mma.m8n8k4`` f64 (DMMA): one double per register.

    PTX "Matrix Fragments for mma.m8n8k4 with .f64": lane ``4g + t`` holds A's ``(g, t)``
    and B's ``(k=t, n=g)``; a second m8n8k4 on rows 8-15 makes A's ``a1`` row ``g + 8``. The
    two accumulators, stacked, are :func:`mma_m16n8_c` (``c0, c1`` rows ``g``, ``c2, c3``
    rows ``g + 8``).
    """
    if operand == "A":
        return Fragment([16, 4], forward_fn=lambda r, c: ((r % 8) * LANES_PER_ROW + c, r // 8))
    return Fragment([4, 8], forward_fn=lambda r, c: (c * LANES_PER_ROW + r, 0))


LANES_PER_ROW = 4
"""Lanes that share a fragment row (``t = lane % 4``)."""


def mma_fragment(operand: Operand, dtype: int | str = "float16") -> Fragment:
    """The ``mma.sync`` fragment for ``operand`` whose K suits ``dtype``.

    16-bit -> m16n8k16, 8-bit -> m16n8k32, tf32 (32-bit) -> m16n8k8, float64 -> two
    m8n8k4 (:func:`dmma_m16n8k4_operand`). C is shared.

    Example::

        >>> from tile.layout.hardware import mma_fragment
        >>> a = mma_fragment("A", "bfloat16")
        >>> [int(e) for e in a.get_input_shape()], a.locals_per_thread()
        ([16, 16], 8)
    """
    if operand == "C":
        return mma_m16n8_c()
    bits = dtype_bits(dtype)
    if bits == 64 and operand in ("A", "B"):
        return dmma_m16n8k4_operand(operand)
    if bits not in MMA_SYNC or operand not in ("A", "B"):
        raise LayoutError(
            f"no mma.sync fragment for operand {operand!r} with {bits}-bit inputs",
            hint="operand is 'A', 'B' or 'C'; inputs are 8-, 16-, 32-bit (tf32) or float64",
        )
    return _mma_sync_operand(bits, operand, dtype)


def wgmma_m64nnk16_d(n: int) -> Fragment:
    """Accumulator of ``wgmma.mma_async.m64nNk16`` (f32): 64xN over 128 threads.

    Each warp owns 16 rows; each 8-column slice is an m16n8 C fragment in
    registers ``d4j .. d4j+3``.
    """
    if not isinstance(n, int) or n < 8 or n > 256 or n % 8 != 0:
        raise LayoutError(f"wgmma N must be 8..256 in steps of 8, not {n!r}", hint="e.g. n=128")
    return mma_m16n8_c().repeat([1, n // 8]).repeat([WARPGROUP_WARPS, 1], repeat_on_thread=True)


def wgmma_m64k16_a(dtype: int | str = "float16") -> Fragment:
    """Register A of ``wgmma.mma_async.m64nNk16``: 64x16, warp w holds rows 16w.. as mma A."""
    return mma_m16n8k16_a(dtype).repeat([WARPGROUP_WARPS, 1], repeat_on_thread=True)


def wgmma_m64k8_a(dtype: int | str = "tf32") -> Fragment:
    """Register A of ``wgmma.mma_async.m64nNk8`` (tf32): 64x8, ``a0..a3`` one element each.

    Warp w holds rows 16w.. in the ``mma.m16n8k8`` tf32 A order (the row half alternates
    first): element i is row ``16w + g + 8 * (i & 1)``, column ``t + 4 * (i >> 1)``. The
    PTX gives the m64nNk8 register layout as a figure; CUTLASS's ``ALayout_64x8``
    (``((4,8,4),(2,2)):((64,1,16),(8,256))`` over ``m + 64k``) states the same map.
    """
    return mma_m16n8k8_a(dtype).repeat([WARPGROUP_WARPS, 1], repeat_on_thread=True)


def wgmma_a(dtype: int | str) -> Fragment:
    """Register A of the wgmma for ``dtype`` operands: :func:`wgmma_m64k16_a` (16-bit) or
    :func:`wgmma_m64k8_a` (tf32). 8-bit wgmma reads A from shared memory only here."""
    bits = dtype_bits(dtype)
    if bits == 32:
        return wgmma_m64k8_a(dtype)
    return wgmma_m64k16_a(dtype)


def make_mma_block_fragment(
    block_m: int,
    block_n: int,
    warps_m: int,
    warps_n: int,
    *,
    warp_order: Literal["row", "col"] = "row",
) -> Fragment:
    """C fragment of a ``block_m x block_n`` tile computed by ``warps_m x warps_n`` warps.

    Each warp computes a ``(block_m / warps_m) x (block_n / warps_n)`` sub-tile with
    m16n8 mma instructions; its registers run over the m16n8 tiles row-major.
    Warp ``wm * warps_n + wn`` (``warp_order="row"``) or ``wm + wn * warps_m``
    (``"col"``) holds sub-tile ``(wm, wn)``.

    Example::

        >>> from tile.layout.hardware import make_mma_block_fragment
        >>> c = make_mma_block_fragment(64, 64, 2, 2)
        >>> int(c.get_thread_size()), c.locals_per_thread()
        (128, 32)
    """
    sizes = {"block_m": block_m, "block_n": block_n, "warps_m": warps_m, "warps_n": warps_n}
    for name, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise LayoutError(f"{name} must be a positive int, got {value!r}", hint="e.g. 64")
    if block_m % (16 * warps_m) != 0 or block_n % (8 * warps_n) != 0:
        raise LayoutError(
            f"a {block_m}x{block_n} block does not split into m16n8 tiles over {warps_m}x{warps_n} warps",
            hint="block_m must be a multiple of 16 * warps_m and block_n of 8 * warps_n",
        )
    warp_m, warp_n = block_m // warps_m, block_n // warps_n
    warp = mma_m16n8_c().repeat([warp_m // 16, warp_n // 8], lower_dim_first=False)
    return warp.repeat([warps_m, warps_n], repeat_on_thread=True, lower_dim_first=warp_order == "col")
