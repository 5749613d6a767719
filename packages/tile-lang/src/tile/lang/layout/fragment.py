"""``tilelang.layout.fragment``: the ``Fragment`` class (``tile.layout.Fragment``)."""

from tile.layout import Fragment as Fragment
