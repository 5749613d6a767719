"""``tile.lang.cuda.intrinsics.layout.mma_layout``: the swizzles of MMA operand tiles, and where
each element of an mma.sync operand block sits among a warp's lanes and registers."""

from __future__ import annotations

from typing import Any

from ...._src.mma_layouts import get_swizzle_layout as get_swizzle_layout
from ...._src.mma_layouts import make_mma_swizzle_layout as make_mma_swizzle_layout

# Where each element of an mma.sync operand block sits: ``(i, j) -> (lane, local)`` for a block
# stored spatial-major (``sr``: i along M for A, along N for B; j along K). ``a``: the A operand
# of one m16n8k instruction; ``b``: B for two n8 instructions side by side (16 along N), the
# second instruction's registers after the first's. From PTX's mma fragment tables (tf32
# m16n8k8, f16/bf16 m16n8k16, s8/u8/fp8 m16n8k32): lane = 4 * groupID + threadID_in_group.
# They take ints or index expressions (``IndexMap.from_func``).


def shared_16x8_to_mma_32x4_layout_sr_a(i: Any, j: Any) -> tuple[Any, Any]:
    """A of m16n8k8 (32-bit elements, tf32): 16 x 8, four per lane."""
    return 4 * (i % 8) + j % 4, 2 * (j // 4) + i // 8


def shared_16x8_to_mma_32x4_layout_sr_b(i: Any, j: Any) -> tuple[Any, Any]:
    """B of two m16n8k8 (32-bit): 16 (N) x 8 (K), four per lane."""
    return 4 * (i % 8) + j % 4, 2 * (i // 8) + j // 4


def shared_16x16_to_mma_32x8_layout_sr_a(i: Any, j: Any) -> tuple[Any, Any]:
    """A of m16n8k16 (16-bit elements): 16 x 16, eight per lane."""
    return 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + 2 * (i // 8) + j % 2


def shared_16x16_to_mma_32x8_layout_sr_b(i: Any, j: Any) -> tuple[Any, Any]:
    """B of two m16n8k16 (16-bit): 16 (N) x 16 (K), eight per lane."""
    return 4 * (i % 8) + (j % 8) // 2, 4 * (i // 8) + 2 * (j // 8) + j % 2


def shared_16x32_to_mma_32x16_layout_sr_a(i: Any, j: Any) -> tuple[Any, Any]:
    """A of m16n8k32 (8-bit elements): 16 x 32, sixteen per lane."""
    return 4 * (i % 8) + (j % 16) // 4, 8 * (j // 16) + 4 * (i // 8) + j % 4


def shared_16x32_to_mma_32x16_layout_sr_b(i: Any, j: Any) -> tuple[Any, Any]:
    """B of two m16n8k32 (8-bit): 16 (N) x 32 (K), sixteen per lane."""
    return 4 * (i % 8) + (j % 16) // 4, 8 * (i // 8) + 4 * (j // 16) + j % 4
