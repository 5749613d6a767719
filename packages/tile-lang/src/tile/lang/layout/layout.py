"""``tilelang.layout.layout``: the ``Layout`` class (``tile.layout.Layout``)."""

from tile.layout import Layout as Layout
