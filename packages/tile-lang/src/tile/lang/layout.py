"""``tilelang.layout`` names: the layout algebra as the language exposes it.

A TileLang program's ``from tilelang.layout import make_swizzled_layout`` becomes
``from tile.lang.layout import make_swizzled_layout``; ``T.Layout`` and ``T.Fragment``
are the same classes. Everything here is ``tile.layout``'s.
"""

from tile.layout import Fragment as Fragment
from tile.layout import Layout as Layout
from tile.layout import make_fully_replicated as make_fully_replicated
from tile.layout import make_linear_fragment as make_linear_fragment
from tile.layout import make_padded_layout as make_padded_layout
from tile.layout import make_swizzled_layout as make_swizzled_layout
