"""``tile.lang.cuda.intrinsics.layout.mma_layout``: the swizzles of MMA operand tiles."""

from ...._src.mma_layouts import get_swizzle_layout as get_swizzle_layout
from ...._src.mma_layouts import make_mma_swizzle_layout as make_mma_swizzle_layout
