"""``tilelang.layout`` names: the layout algebra as the language exposes it.

A TileLang program's ``from tilelang.layout import make_swizzled_layout`` becomes
``from tile.lang.layout import make_swizzled_layout`` (and ``tilelang.layout.swizzle``,
``.fragment``, ``.layout`` are ``tile.lang.layout.swizzle``, ...); ``T.Layout`` and
``T.Fragment`` are the same classes. Everything here is built from ``tile.layout``'s
algebra: the XOR swizzles are ``tile.layout.SwizzledLayout`` (PTX's 32/64/128-byte modes),
the 8x8 fragments are ``ldmatrix``'s destination (PTX ISA, "Matrix fragments for ldmatrix").
"""

from tile.layout import Fragment as Fragment
from tile.layout import Layout as Layout
from tile.layout import make_fully_replicated as make_fully_replicated
from tile.layout import make_linear_fragment as make_linear_fragment
from tile.layout import make_padded_layout as make_padded_layout

from .swizzle import SwizzleMode as SwizzleMode
from .swizzle import make_cutlass_metadata_layout as make_cutlass_metadata_layout
from .swizzle import make_full_bank_swizzled_layout as make_full_bank_swizzled_layout
from .swizzle import make_fully_replicated_layout_fragment as make_fully_replicated_layout_fragment
from .swizzle import make_gemm_fragment_8x8 as make_gemm_fragment_8x8
from .swizzle import make_gemm_fragment_8x8_transposed as make_gemm_fragment_8x8_transposed
from .swizzle import make_half_bank_swizzled_layout as make_half_bank_swizzled_layout
from .swizzle import make_linear_layout as make_linear_layout
from .swizzle import make_quarter_bank_swizzled_layout as make_quarter_bank_swizzled_layout
from .swizzle import make_swizzled_layout as make_swizzled_layout
from .swizzle import make_tcgen05mma_swizzled_layout as make_tcgen05mma_swizzled_layout
from .swizzle import make_volta_swizzled_layout as make_volta_swizzled_layout
from .swizzle import make_wgmma_swizzled_layout as make_wgmma_swizzled_layout
