"""``tile.lang.rocm.intrinsics.mfma_layout``: where each element of a 16 x K MFMA operand block
sits among a wavefront's 64 lanes and their registers.

A of ``v_mfma_*_16x16xK``: row ``i`` (M) and column ``j`` (K) go to lane ``i + 16 * (j // R)``
and register element ``j % R``, with ``R = K / 4`` elements per lane (AMD's CDNA3 ISA, the
16x16 MFMA operand layout; ``tile.testsupport.isa_tables.mfma_16x16x16_f16_a`` for K = 16).
B stored spatial-major (``(n, k)``) has the same map. The functions take ints or index expressions.
"""

from __future__ import annotations

from typing import Any


def _operand(per_lane: int) -> Any:
    def place(i: Any, j: Any) -> tuple[Any, Any]:
        return i + 16 * (j // per_lane), j % per_lane

    return place


shared_16x4_to_local_64x1_layout_A = _operand(1)
shared_16x16_to_local_64x4_layout_A = _operand(4)
shared_16x32_to_local_64x8_layout_A = _operand(8)
shared_16x64_to_local_64x16_layout_A = _operand(16)
shared_16x4_to_local_64x1_layout_B = _operand(1)
shared_16x16_to_local_64x4_layout_B = _operand(4)
shared_16x32_to_local_64x8_layout_B = _operand(8)
shared_16x64_to_local_64x16_layout_B = _operand(16)

__all__ = [
    "shared_16x4_to_local_64x1_layout_A",
    "shared_16x4_to_local_64x1_layout_B",
    "shared_16x16_to_local_64x4_layout_A",
    "shared_16x16_to_local_64x4_layout_B",
    "shared_16x32_to_local_64x8_layout_A",
    "shared_16x32_to_local_64x8_layout_B",
    "shared_16x64_to_local_64x16_layout_A",
    "shared_16x64_to_local_64x16_layout_B",
]
