"""Layout: construction, shapes, mapping, equality, inversion and the errors users can cause."""

from __future__ import annotations

import pytest
from tvm import tirx

from tile.layout import Layout, LayoutError, make_padded_layout


def ints(exprs) -> list[int]:
    return [int(e) for e in exprs]


def test_shapes_and_mapping_of_a_column_major_layout() -> None:
    layout = Layout([4, 8], lambda i, j: j * 4 + i)
    assert ints(layout.get_input_shape()) == [4, 8]
    assert ints(layout.get_output_shape()) == [32]
    assert [v.name for v in layout.get_forward_vars()] == ["i", "j"]
    assert str(layout.get_forward_index()[0]) == "j * 4 + i"
    assert ints(layout.map_forward_index([1, 2])) == [9]
    assert int(layout.offset([3, 7])) == 31
    assert repr(layout) == "Layout([4, 8] -> [32]: (i, j) -> (j * 4 + i))"


def test_multi_output_offset_is_row_major_over_output_shape() -> None:
    tiled = Layout([8, 8], lambda i, j: [i // 4, j // 4, i % 4, j % 4])
    assert ints(tiled.get_output_shape()) == [2, 2, 4, 4]
    assert ints(tiled.map_forward_index([5, 2])) == [1, 0, 1, 2]
    assert int(tiled.offset([5, 2])) == 1 * 32 + 0 * 16 + 1 * 4 + 2


def test_symbolic_map_forward_index_simplifies() -> None:
    layout = Layout([16, 16], lambda i, j: [i * 16 + j])
    x = tirx.Var("x", "int32")
    (e,) = layout.map_forward_index([x // 16, x % 16])
    assert str(e) == "x"


def test_symbolic_extent_shapes_and_inverse() -> None:
    n = tirx.Var("n", "int32")
    layout = Layout([n, 8], lambda i, j: i * 8 + j)
    assert str(layout.get_output_shape()[0]) == "n * 8"
    assert layout.is_bijective()
    inv = layout.inverse()
    assert [str(e) for e in inv.get_output_shape()] == ["n", "8"]
    with pytest.raises(LayoutError, match="symbolic"):
        list(layout.enumerate())


def test_enumerate_is_row_major_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    layout = Layout([2, 2], lambda i, j: j * 2 + i)
    assert list(layout.enumerate()) == [((0, 0), (0,)), ((0, 1), (2,)), ((1, 0), (1,)), ((1, 1), (3,))]
    monkeypatch.setenv("TILE_LAYOUT_MAX_ENUMERATE", "3")
    with pytest.raises(LayoutError, match="TILE_LAYOUT_MAX_ENUMERATE"):
        list(layout.enumerate())


def test_semantic_equality_ignores_names_and_spelling() -> None:
    a = Layout([8, 8], lambda i, j: i * 8 + j)
    b = Layout([8, 8], lambda x, y: (x * 4 + y // 2) * 2 + y % 2)
    assert a == b and a.is_equal(b)
    assert a != Layout([8, 8], lambda i, j: j * 8 + i)
    assert a != Layout([8, 4], lambda i, j: i * 8 + j)
    # XOR spellings the analyzer cannot prove equal are settled by enumeration.
    x1 = Layout([8, 8], lambda i, j: [i, tirx.bitwise_xor(j, i)])
    x2 = Layout([8, 8], lambda i, j: [i, tirx.bitwise_xor(i, j)])
    assert x1 == x2


def test_compose_applies_inner_first_and_checks_shapes() -> None:
    outer = Layout([4, 8], lambda i, j: j * 4 + i)
    inner = Layout([32], lambda x: [x // 8, x % 8])
    composed = outer.compose(inner)
    assert ints(composed.get_input_shape()) == [32]
    for (x,), (y,) in composed.enumerate():
        assert y == (x % 8) * 4 + x // 8
    with pytest.raises(LayoutError, match="compose") as err:
        outer.compose(Layout([16], lambda x: [x // 4, x % 4]))
    assert "hint:" in str(err.value)


def test_inverse_of_affine_layouts() -> None:
    layout = Layout([4, 8], lambda i, j: [i // 2, j, i % 2])
    inv = layout.inverse()
    assert ints(inv.get_output_shape()) == [4, 8]
    for coord, out in layout.enumerate():
        assert tuple(ints(inv.map_forward_index(list(out)))) == coord
    assert inv.inverse() == layout


def test_non_bijective_layouts_are_refused_or_guarded() -> None:
    broadcast = Layout([4, 4], lambda i, j: i)
    assert not broadcast.is_bijective()
    with pytest.raises(LayoutError, match="not bijective"):
        broadcast.inverse()
    with pytest.raises(LayoutError):
        broadcast.inverse_with_guard()
    strided = Layout([4], lambda i: i * 3)
    inv, guard = strided.inverse_with_guard()
    guard_map = Layout.from_parts(inv.get_input_shape(), inv.get_forward_vars(), [guard])
    assert [o for (o,), (ok,) in guard_map.enumerate() if ok] == [0, 3, 6, 9]
    assert ints(inv.map_forward_index([9])) == [3]
    bij_inv, true_guard = Layout([4], lambda i: 3 - i).inverse_with_guard()
    assert bool(true_guard) and ints(bij_inv.map_forward_index([0])) == [3]


def test_padding_inverse_guard_matches_figure_5c() -> None:
    # Paper Fig. 5(c): padding rows of a tile; the inverse needs a guard for the pad columns.
    padded = make_padded_layout([16, 16], 4)
    inv, guard = padded.inverse_with_guard()
    assert str(guard) == "o0 % 20 < 16"
    assert ints(inv.map_forward_index([45])) == [2, 5]


def test_non_affine_layout_needs_inverse_fn() -> None:
    xor = Layout([8, 8], lambda i, j: [i, tirx.bitwise_xor(j, i)])
    assert xor.is_bijective()
    with pytest.raises(LayoutError, match="inverse_fn"):
        xor.inverse()


@pytest.mark.parametrize(
    ("shape", "fn", "match"),
    [
        ([0, 4], lambda i, j: i, "non-positive"),
        ([], lambda: 0, "empty"),
        ("ab", lambda i: i, "sequence"),
        ([4.5], lambda i: i, "not an extent"),
        ([4], lambda i: [], "no expressions"),
        ([4], lambda i: "x", "returned"),
        ([4], lambda i: i + tirx.Var("stray", "int32"), "not its inputs"),
    ],
)
def test_bad_layouts_raise_layout_error_with_hint(shape, fn, match) -> None:
    with pytest.raises(LayoutError, match=match) as err:
        Layout(shape, fn)
    assert err.value.hint


def test_map_forward_index_arity_is_checked() -> None:
    with pytest.raises(LayoutError, match="2 indices"):
        Layout([4, 4], lambda i, j: i * 4 + j).map_forward_index([1])


def test_layouts_are_hashable_consistently_with_equality() -> None:
    a = Layout([8, 8], lambda i, j: i * 8 + j)
    b = Layout([8, 8], lambda x, y: x * 8 + y)
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
