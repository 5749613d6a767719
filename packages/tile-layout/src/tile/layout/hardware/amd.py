"""AMD CDNA (wave64) MFMA register fragments, grown from a lane-per-row base.

Element numbers are AMD's: A/B operand element ``v`` is number ``v`` of the lane's
operand bits, lowest first (f16: VGPR ``v // 2``, half ``v % 2``; int8: byte ``v``);
accumulator element ``g`` is VGPR ``g``. A is ``(i, k)``, B is ``(k, j)``, D is
``(i, j)`` with D = A·B + C in AMD's orientation. Source: AMD Matrix Instruction
Calculator, ``--detail-instruction`` for ``v_mfma_f32_16x16x16_f16`` and
``v_mfma_f32_32x32x8_f16`` (CDNA2/CDNA3).

Every single-block MFMA (no CBSZ/ABID/BLGP modifiers) follows one rule: a ``T x T x K``
instruction (``T`` = 16 or 32) gives each lane ``K * T / 64`` consecutive K elements of
one A row (one B column), lane ``i + T * (k // per_lane)``; the int8 forms
(``v_mfma_i32_16x16x16i8``: 4 per lane, ``v_mfma_i32_16x16x32_i8``: 8 per lane) included,
as IREE's table of AMD intrinsics spells it (iree-org/iree,
``compiler/src/iree/compiler/Codegen/Dialect/GPU/IR/IREEGPUAttrs.cpp``,
``getSingleSubgroupLayout``: ``MFMA_I32_16x16x16_I8`` shares ``mfmaLhs16xK(16)`` with
the f16 form, ``MFMA_I32_16x16x32_I8`` is ``mfmaLhs16xK(32)``: thread ``{16, 4}``,
strides ``{1, 16}``, element ``{1, 8}``). The accumulator (f32 or i32) depends on ``T`` only.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from ..errors import LayoutError
from ..fragment import Fragment
from ..swizzle import dtype_bits
from ._base import OperandBuilder, lane_fragment, operand_builders

WAVE_SIZE = 64
K_PER_LANE = 4
"""Every lane holds 4 consecutive K elements of A or B (two 32-bit VGPRs of f16)."""


def _check_dtype(dtype: int | str) -> None:
    if dtype_bits(dtype) != 16:
        raise LayoutError(f"these MFMA fragments take f16/bf16 inputs, not {dtype!r}", hint="use float16")


def mfma_16x16x16_d() -> Fragment:
    """D/C (16x16 f32, ``(i, j)``): lane ``j + 16 * (i // 4)``, VGPR ``i % 4``."""
    return lane_fragment(4, 16, lane_dim=1).repeat([4, 1], repeat_on_thread=True)


def mfma_32x32x8_d() -> Fragment:
    """D/C (32x32 f32): 8-row groups; in each, lanes 0-31 hold 4 rows and lanes 32-63 the next 4."""
    half = lane_fragment(4, 32, lane_dim=1).repeat([2, 1], repeat_on_thread=True)
    return half.repeat([4, 1])


MFMA_OPERAND_SHAPES = ((16, 16), (16, 32), (32, 8), (32, 16))
"""``(T, K)`` of the single-block ``T x T x K`` MFMAs :func:`mfma_operand` builds."""


def mfma_operand(which: Literal["A", "B"], tile: int, k: int) -> Fragment:
    """A (``tile x k``) or B (``k x tile``) of a single-block ``tile x tile x k`` MFMA, any dtype.

    Lane ``i + tile * (kk // per_lane)`` holds element ``kk % per_lane`` of A row ``i``
    (B column ``i``), ``per_lane = k * tile / 64``: 4 for 16x16x16 and 32x32x8 (f16,
    bf16, int8 on CDNA2), 8 for 16x16x32 and 32x32x16 (int8 on CDNA3).

    Example::

        >>> frag = mfma_operand("A", 16, 32)
        >>> frag.owners((3, 9)), frag.locals_per_thread()
        ([19], 8)
    """
    if (tile, k) not in MFMA_OPERAND_SHAPES:
        shapes = ", ".join(f"{t}x{t}x{kk}" for t, kk in MFMA_OPERAND_SHAPES)
        raise LayoutError(f"no single-block MFMA is {tile}x{tile}x{k}", hint=f"use one of {shapes}")
    per_lane = k * tile // WAVE_SIZE
    groups = WAVE_SIZE // tile
    if which == "A":
        return lane_fragment(tile, per_lane, lane_dim=0).repeat([1, groups], repeat_on_thread=True)
    return lane_fragment(per_lane, tile, lane_dim=1).repeat([groups, 1], repeat_on_thread=True)


MFMA_F16 = {
    # (T, K): the f16/bf16 T x T x K MFMA that the named A/B builders below stand for
    (16, 16): "v_mfma_f32_16x16x16_{f16,bf16}",
    (32, 8): "v_mfma_f32_32x32x8_f16",
}
"""Both give each lane ``K_PER_LANE`` consecutive K elements (:func:`mfma_operand`)."""


def _f16_operand(tile: int, k: int, operand: Literal["A", "B"], dtype: int | str) -> Fragment:
    _check_dtype(dtype)
    return mfma_operand(operand, tile, k)


def _f16_builders(tile: int, k: int) -> tuple[OperandBuilder, OperandBuilder]:
    docs = (
        f"A ({tile}x{k}, ``(i, k)``) of ``{MFMA_F16[tile, k]}``: lane ``i + {tile} * (k // 4)``.",
        f"B ({k}x{tile}, ``(k, j)``): lane ``j + {tile} * (k // 4)``, element ``k % 4``.",
    )
    return operand_builders(f"mfma_{tile}x{tile}x{k}", "float16", partial(_f16_operand, tile, k), docs)


mfma_16x16x16_a, mfma_16x16x16_b = _f16_builders(16, 16)
mfma_32x32x8_a, mfma_32x32x8_b = _f16_builders(32, 8)


def mfma_d(tile: int) -> Fragment:
    """D/C (``tile x tile``, f32 or i32) of the single-block ``tile x tile`` MFMAs (16 or 32)."""
    if tile == 16:
        return mfma_16x16x16_d()
    if tile == 32:
        return mfma_32x32x8_d()
    raise LayoutError(f"no single-block MFMA accumulator is {tile}x{tile}", hint="use 16 or 32")


def make_mfma_block_fragment(
    block_m: int,
    block_n: int,
    waves_m: int,
    waves_n: int,
    *,
    wave_order: Literal["row", "col"] = "row",
    tile: int = 16,
) -> Fragment:
    """D fragment of a block tile computed by ``waves_m x waves_n`` waves with ``tile x tile`` MFMAs.

    Each wave's registers run over its ``tile x tile`` accumulator tiles row-major (4
    registers per 16x16 tile, 16 per 32x32 tile); wave ``wm * waves_n + wn`` holds
    sub-tile ``(wm, wn)`` (``wave_order="row"``).
    """
    base = mfma_d(tile)
    if block_m % (tile * waves_m) != 0 or block_n % (tile * waves_n) != 0:
        raise LayoutError(
            f"a {block_m}x{block_n} block does not split into {tile}x{tile} tiles "
            f"over {waves_m}x{waves_n} waves",
            hint=f"block_m must be a multiple of {tile} * waves_m and block_n of {tile} * waves_n",
        )
    wave_m, wave_n = block_m // waves_m, block_n // waves_n
    wave = base.repeat([wave_m // tile, wave_n // tile], lower_dim_first=False)
    return wave.repeat([waves_m, waves_n], repeat_on_thread=True, lower_dim_first=wave_order == "col")
