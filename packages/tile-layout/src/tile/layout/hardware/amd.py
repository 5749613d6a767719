"""AMD CDNA (wave64) MFMA register fragments, grown from a lane-per-row base.

Element numbers are AMD's: A/B operand element ``v`` is f16 number ``v`` of the two
VGPRs (VGPR ``v // 2``, half ``v % 2``); accumulator element ``g`` is VGPR ``g``.
A is ``(i, k)``, B is ``(k, j)``, D is ``(i, j)`` with D = A·B + C in AMD's
orientation. Source: AMD Matrix Instruction Calculator, ``--detail-instruction``
for ``v_mfma_f32_16x16x16_f16`` and ``v_mfma_f32_32x32x8_f16`` (CDNA2/CDNA3).
"""

from __future__ import annotations

from typing import Literal

from ..errors import LayoutError
from ..fragment import Fragment
from ..swizzle import dtype_bits
from ._base import lane_fragment

WAVE_SIZE = 64
K_PER_LANE = 4
"""Every lane holds 4 consecutive K elements of A or B (two 32-bit VGPRs of f16)."""


def _check_dtype(dtype: int | str) -> None:
    if dtype_bits(dtype) != 16:
        raise LayoutError(f"these MFMA fragments take f16/bf16 inputs, not {dtype!r}", hint="use float16")


def mfma_16x16x16_a(dtype: int | str = "float16") -> Fragment:
    """A (16x16, ``(i, k)``) of ``v_mfma_f32_16x16x16_{f16,bf16}``: lane ``i + 16 * (k // 4)``."""
    _check_dtype(dtype)
    return lane_fragment(16, K_PER_LANE, lane_dim=0).repeat([1, 4], repeat_on_thread=True)


def mfma_16x16x16_b(dtype: int | str = "float16") -> Fragment:
    """B (16x16, ``(k, j)``): lane ``j + 16 * (k // 4)``, element ``k % 4``."""
    _check_dtype(dtype)
    return lane_fragment(K_PER_LANE, 16, lane_dim=1).repeat([4, 1], repeat_on_thread=True)


def mfma_16x16x16_d() -> Fragment:
    """D/C (16x16 f32, ``(i, j)``): lane ``j + 16 * (i // 4)``, VGPR ``i % 4``."""
    return lane_fragment(4, 16, lane_dim=1).repeat([4, 1], repeat_on_thread=True)


def mfma_32x32x8_a(dtype: int | str = "float16") -> Fragment:
    """A (32x8, ``(i, k)``) of ``v_mfma_f32_32x32x8_f16``: lane ``i + 32 * (k // 4)``."""
    _check_dtype(dtype)
    return lane_fragment(32, K_PER_LANE, lane_dim=0).repeat([1, 2], repeat_on_thread=True)


def mfma_32x32x8_b(dtype: int | str = "float16") -> Fragment:
    """B (8x32, ``(k, j)``): lane ``j + 32 * (k // 4)``, element ``k % 4``."""
    _check_dtype(dtype)
    return lane_fragment(K_PER_LANE, 32, lane_dim=1).repeat([2, 1], repeat_on_thread=True)


def mfma_32x32x8_d() -> Fragment:
    """D/C (32x32 f32): 8-row groups; in each, lanes 0-31 hold 4 rows and lanes 32-63 the next 4."""
    half = lane_fragment(4, 32, lane_dim=1).repeat([2, 1], repeat_on_thread=True)
    return half.repeat([4, 1])


def make_mfma_block_fragment(
    block_m: int,
    block_n: int,
    waves_m: int,
    waves_n: int,
    *,
    wave_order: Literal["row", "col"] = "row",
) -> Fragment:
    """D fragment of a block tile computed by ``waves_m x waves_n`` waves with 16x16x16 MFMA.

    Each wave's registers run over its 16x16 tiles row-major; wave
    ``wm * waves_n + wn`` holds sub-tile ``(wm, wn)`` (``wave_order="row"``).
    """
    if block_m % (16 * waves_m) != 0 or block_n % (16 * waves_n) != 0:
        raise LayoutError(
            f"a {block_m}x{block_n} block does not split into 16x16 tiles over {waves_m}x{waves_n} waves",
            hint="block_m must be a multiple of 16 * waves_m and block_n of 16 * waves_n",
        )
    wave_m, wave_n = block_m // waves_m, block_n // waves_n
    wave = mfma_16x16x16_d().repeat([wave_m // 16, wave_n // 16], lower_dim_first=False)
    return wave.repeat([waves_m, waves_n], repeat_on_thread=True, lower_dim_first=wave_order == "col")
