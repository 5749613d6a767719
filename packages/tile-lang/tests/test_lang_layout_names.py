"""TileLang's layout names mean the same thing here: T.Layout, T.Fragment, tilelang.layout."""

import tile.lang as tilelang
import tile.lang.language as T
from tile.layout import Fragment, Layout


def test_layout_and_fragment_are_the_algebra_classes():
    assert T.Layout is Layout and T.Fragment is Fragment
    col_major = T.Layout([4, 8], lambda i, j: j * 4 + i)
    assert [int(x) for x in col_major.map_forward_index([1, 2])] == [9]


def test_make_swizzled_layout_is_reachable_the_tilelang_way():
    swizzled = tilelang.layout.make_swizzled_layout([64, 64], "float16")
    # 128-byte rows of fp16: the 128B swizzle; row 1's first 16-byte chunk moves to chunk 1.
    assert swizzled.swizzle_bytes == 128
    assert [int(x) for x in swizzled.map_forward_index([1, 0])] == [1, 8]
