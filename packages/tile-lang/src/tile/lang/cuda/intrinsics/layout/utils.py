"""``tile.lang.cuda.intrinsics.layout.utils``: lane offsets and sizes of MMA fragments."""

from ...._src.mma_layouts import get_ldmatrix_offset as get_ldmatrix_offset
from ...._src.mma_layouts import get_mma_micro_size as get_mma_micro_size
from ...._src.mma_layouts import get_swizzle_layout as get_swizzle_layout
from ...._src.mma_layouts import make_mma_swizzle_layout as make_mma_swizzle_layout
from ...._src.mma_layouts import mma_store_index_map as mma_store_index_map
