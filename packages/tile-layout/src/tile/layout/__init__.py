"""tile.layout: layout and fragment algebra for tile programs.

``Layout`` maps a logical tile index to physical coordinates; ``Fragment`` maps it to
``(thread, local index)``; ``swizzle`` builds the hardware shared-memory layouts and
``hardware`` the register fragments of the matrix instructions. ``evaluate_over`` computes
integer expressions at every point of a small box (``box_grid``) with numpy.
"""

from . import hardware as hardware
from ._eval import UnsupportedExpr as UnsupportedExpr
from ._eval import box_grid as box_grid
from ._eval import evaluate_over as evaluate_over
from .errors import LayoutError as LayoutError
from .errors import TileError as TileError
from .fragment import Fragment as Fragment
from .fragment import make_fully_replicated as make_fully_replicated
from .fragment import make_linear_fragment as make_linear_fragment
from .layout import Layout as Layout
from .swizzle import SwizzledLayout as SwizzledLayout
from .swizzle import choose_swizzle_bytes as choose_swizzle_bytes
from .swizzle import dtype_bits as dtype_bits
from .swizzle import make_padded_layout as make_padded_layout
from .swizzle import make_row_major_layout as make_row_major_layout
from .swizzle import make_swizzle_layout as make_swizzle_layout
from .swizzle import make_swizzled_layout as make_swizzled_layout
