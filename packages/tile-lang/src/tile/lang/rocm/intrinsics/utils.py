"""``tile.lang.rocm.intrinsics.utils``: the block one 16 x 16 MFMA instruction computes."""

from __future__ import annotations

from typing import Any

EIGHT_BIT = frozenset({"int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2"})
"""Operand types whose 16 x 16 MFMA takes 32 along K (``v_mfma_i32_16x16x32_i8`` and the fp8 forms)."""


def get_mma_micro_size(dtype: Any) -> tuple[int, int, int]:
    """``(M, N, K)`` of the 16 x 16 MFMA for operands of ``dtype``: K is 32 for 8-bit types, 16
    otherwise (``v_mfma_f32_16x16x16_f16``), as TileLang's AMD emitters use them."""
    return 16, 16, 32 if str(dtype) in EIGHT_BIT else 16
