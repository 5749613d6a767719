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


# ----------------------------------------------------------------- expand, repeat, linearize
def _table(layout: Layout) -> dict[tuple[int, ...], tuple[int, ...]]:
    return dict(layout.enumerate())


def test_expand_adds_leading_dims_that_map_to_themselves() -> None:
    base = Layout([4, 8], lambda j, k: k * 4 + j)  # column-major
    grown = base.expand([3])
    assert ints(grown.get_input_shape()) == [3, 4, 8] and ints(grown.get_output_shape()) == [3, 32]
    inner = _table(base)
    for (s, j, k), out in _table(grown).items():  # checked point by point against the 2-D map
        assert out == (s, *inner[(j, k)])
    assert grown.is_equal(Layout([3, 4, 8], lambda i, j, k: [i, k * 4 + j]))
    assert base.expand(2).is_equal(base.expand([2])) and base.expand([]) is base
    assert ints(base.expand([2, 5]).get_output_shape()) == [2, 5, 32]


def test_expand_of_a_swizzle_keeps_an_inverse() -> None:
    from tile.layout import make_swizzle_layout

    grown = make_swizzle_layout([8, 64], "float16", 128).expand([2])
    assert grown.is_bijective()
    inverse = grown.inverse()
    for coord, out in _table(grown).items():
        assert tuple(ints(inverse.map_forward_index(list(out)))) == coord


@pytest.mark.parametrize("bad", [0, [-1], [2, 0]])
def test_expand_refuses_counts_below_one_as_value_errors(bad) -> None:
    with pytest.raises(ValueError, match="below 1") as err:
        Layout([4], lambda i: i).expand(bad)
    assert isinstance(err.value, LayoutError)


@pytest.mark.parametrize("bad", ["4", [1.5], True])
def test_expand_refuses_what_is_not_a_count_as_type_errors(bad) -> None:
    with pytest.raises(TypeError):
        Layout([4], lambda i: i).expand(bad)


def test_repeat_lays_copies_side_by_side_with_the_copy_number_first() -> None:
    atom = Layout([2, 4], lambda i, j: i * 4 + j)
    rows = atom.repeat(dim=0, factor=3)
    cols = atom.repeat(dim=1, factor=2)
    assert ints(rows.get_output_shape()) == [3, 8] and ints(cols.get_output_shape()) == [2, 8]
    inner = _table(atom)
    for (i, j), out in _table(rows).items():
        assert out == (i // 2, *inner[(i % 2, j)])
    for (i, j), out in _table(cols).items():
        assert out == (j // 4, *inner[(i, j % 4)])
    assert atom.repeat(dim=-1, factor=2).is_equal(cols)
    assert atom.repeat(dim=0, factor=1) is atom


@pytest.mark.parametrize(("dim", "factor"), [(0, 0), (0, -1), (2, 2), (-3, 2)])
def test_repeat_refuses_a_bad_dim_or_factor_as_value_errors(dim, factor) -> None:
    with pytest.raises(ValueError):
        Layout([8, 64], lambda i, j: i * 64 + j).repeat(dim=dim, factor=factor)


def test_linearized_forward_index_is_the_row_major_offset_into_the_outputs() -> None:
    layout = Layout([2, 32], lambda i, j: [j, i])  # outputs (32, 2)
    flat = layout.get_linearized_forward_index()
    (i, j) = layout.get_forward_vars()
    analyzer = tvm_sym_analyzer()
    assert analyzer.can_prove_equal(flat, j * 2 + i)
    split = Layout([64], lambda i: [i // 32, i % 32])
    assert analyzer.can_prove_equal(split.get_linearized_forward_index(), split.get_forward_vars()[0])


def tvm_sym_analyzer():
    import tvm

    return tvm.sym.Analyzer()


@pytest.mark.parametrize(
    ("forward", "position"),
    [
        # 512 elements over 128 threads x 4 registers: thread = p % 128, register = p // 128 for
        # the row-major position p = 16 i + 4 j + k; simplified, the register reads i // 8, and
        # tvm's iterator-map analysis no longer inverts it (TileLang's issue 1719)
        (lambda i, j, k: [(i * 16 + j * 4 + k) % 128, i // 8], lambda i, j, k: 16 * i + 4 * j + k),
        # a replicated fragment's owner layout over (i, j, rep) walks rep before j
        (lambda i, j, r: [(i * 16 + r * 4 + j) % 128, i // 8], lambda i, j, r: 16 * i + 4 * r + j),
    ],
    ids=["row-major", "another-dim-order"],
)
def test_a_split_of_a_position_is_inverted_point_by_point(forward, position) -> None:
    table = dict(Layout([32, 4, 4], forward).inverse().enumerate())
    for i in range(32):
        for j in range(4):
            for k in range(4):
                p = position(i, j, k)
                assert table[(p % 128, p // 128)] == (i, j, k)


def test_a_layout_no_order_of_positions_explains_still_needs_inverse_fn() -> None:
    # bijective, but thread = (i + j * j) % 8 is no affine function of a position
    layout = Layout([8, 8], lambda i, j: [(i + j * j) % 8, j])
    with pytest.raises(LayoutError, match="inverse_fn"):
        layout.inverse()


def test_collision_names_the_first_input_that_lands_on_an_earlier_ones_point() -> None:
    assert Layout([128], lambda i: i % 64).collision() == ((0,), (64,), (0,))
    assert Layout([4, 4], lambda i, j: [j, i // 2]).collision() == ((0, 0), (1, 0), (0, 0))
    assert Layout([8, 8], lambda i, j: [j, i]).collision() is None
