"""Hypothesis properties of the layout algebra on random layouts and fragments."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tvm import tirx

from tile.layout import Fragment, Layout, make_linear_fragment, make_swizzle_layout
from tile.layout.hardware import ldmatrix_fragment, mma_m16n8_c

SETTINGS = settings(max_examples=25, deadline=None)
EXTENTS = st.sampled_from([1, 2, 3, 4, 6, 8])


@st.composite
def shapes(draw: st.DrawFn) -> list[int]:
    return draw(st.lists(EXTENTS, min_size=1, max_size=3))


def row_major(coords, extents):
    acc = 0
    for c, e in zip(coords, extents, strict=True):
        acc = acc * e + c
    return acc


@st.composite
def bijective_layouts(draw: st.DrawFn, shape: list[int] | None = None) -> Layout:
    """Random bijections: permuted strides, tilings (splits), or an XOR on a power-of-2 dim."""
    shape = shape if shape is not None else draw(shapes())
    kind = draw(st.sampled_from(["strides", "tiling", "xor"]))
    order = draw(st.permutations(range(len(shape))))
    if kind == "strides":
        strides, acc = [0] * len(shape), 1
        for d in reversed(order):
            strides[d], acc = acc, acc * shape[d]
        return Layout(shape, lambda *v: sum(x * s for x, s in zip(v, strides, strict=True)))
    if kind == "tiling":
        factors = [draw(st.sampled_from([f for f in range(1, e + 1) if e % f == 0])) for e in shape]

        def tiled(*v):
            outer = [v[d] // factors[d] for d in order]
            inner = [v[d] % factors[d] for d in order]
            return outer + inner

        return Layout(shape, tiled)
    pow2 = [d for d, e in enumerate(shape) if e in (1, 2, 4, 8)]
    if not pow2 or len(shape) < 2:
        return Layout(shape, lambda *v: list(reversed(v)))
    d = draw(st.sampled_from(pow2))
    other = (d + 1) % len(shape)
    mask = shape[d] - 1

    def xor(*v):
        out = list(v)
        out[d] = tirx.bitwise_xor(v[d], tirx.floormod(v[other], shape[d]) if mask else 0)
        return out

    return Layout(shape, xor, inverse_fn=xor)


def ints(exprs) -> tuple[int, ...]:
    return tuple(int(e) for e in exprs)


@SETTINGS
@given(bijective_layouts())
def test_inverse_after_forward_is_identity(layout: Layout) -> None:
    assert layout.is_bijective()
    inv = layout.inverse()
    forward = dict(layout.enumerate())
    backward = dict(inv.enumerate())
    assert len(backward) == math.prod(ints(layout.get_output_shape()))
    for coord, out in forward.items():
        assert backward[out] == coord
    assert inv.inverse().is_equal(layout)


@SETTINGS
@given(st.data())
def test_compose_is_associative(data: st.DataObject) -> None:
    first = data.draw(bijective_layouts())
    second = data.draw(bijective_layouts(list(ints(first.get_output_shape()))))
    third = data.draw(bijective_layouts(list(ints(second.get_output_shape()))))
    left = third.compose(second).compose(first)
    right = third.compose(second.compose(first))
    assert left.is_equal(right)
    for coord, out in left.enumerate():
        mid = ints(first.map_forward_index(list(coord)))
        mid = ints(second.map_forward_index(list(mid)))
        assert out == ints(third.map_forward_index(list(mid)))


@SETTINGS
@given(
    st.sampled_from([(8, 32), (8, 64), (8, 128), (16, 32), (16, 64), (16, 128), (32, 128)]),
    st.integers(1, 4),
    st.integers(1, 2),
)
def test_swizzles_permute_within_their_atom(mode, atoms, blocks) -> None:
    bits, span = mode
    span_elems = span * 8 // bits
    layout = make_swizzle_layout([8 * atoms, blocks * span_elems], bits, span)
    seen = set()
    for (i, j), (r, c) in layout.enumerate():
        assert r == (j // span_elems) * 8 * atoms + i  # the row never moves
        assert c // (128 // bits) < span // 16  # stays inside the row's chunks
        seen.add((r, c))
    assert len(seen) == 8 * atoms * blocks * span_elems


def base_fragments():
    return st.sampled_from(
        [
            ("mma C", mma_m16n8_c),
            ("ldmatrix", lambda: ldmatrix_fragment(1)),
            ("linear", lambda: make_linear_fragment([4, 8], 8)),
            ("rep2", lambda: Fragment([4, 4], forward_fn=lambda i, j, r: (i * 2 + r, j), replicate=2)),
        ]
    )


@st.composite
def fragment_programs(draw: st.DrawFn) -> tuple[Fragment, list[tuple[str, object]]]:
    _name, make = draw(base_fragments())
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["repeat_regs", "repeat_threads", "replicate"]),
                st.lists(st.integers(1, 2), min_size=2, max_size=2),
                st.booleans(),
            ),
            max_size=3,
        )
    )
    return make(), ops


@SETTINGS
@given(fragment_programs())
def test_repeat_and_replicate_change_extents_as_specified(program) -> None:
    frag, ops = program
    for op, counts, lower in ops:
        threads, locals_, rep = int(frag.get_thread_size()), frag.locals_per_thread(), frag.replicate_size
        shape = ints(frag.get_input_shape())
        if op == "replicate":
            frag = frag.replicate(counts[0] + 1)
            assert frag.replicate_size == rep * (counts[0] + 1)
            assert int(frag.get_thread_size()) == threads * (counts[0] + 1)
            assert frag.locals_per_thread() == locals_
            continue
        on_thread = op == "repeat_threads"
        frag = frag.repeat(counts, repeat_on_thread=on_thread, lower_dim_first=lower)
        assert ints(frag.get_input_shape()) == tuple(e * c for e, c in zip(shape, counts, strict=True))
        grow = math.prod(counts)
        assert int(frag.get_thread_size()) == threads * (grow if on_thread else 1)
        assert frag.locals_per_thread() == locals_ * (1 if on_thread else grow)
        assert frag.replicate_size == rep
    # Every element is held by exactly `replicate` distinct threads, and no two elements share
    # a (thread, local) slot.
    assert (frag.ownership_counts() == frag.replicate_size).all()
    slots = [(t, loc) for _, _, t, loc in frag.enumerate_threads()]
    assert len(set(slots)) == len(slots)


@SETTINGS
@given(fragment_programs(), st.integers(2, 4))
def test_condense_and_remove_keep_ownership(program, k) -> None:
    frag, _ops = program
    widened = frag.replicate(k)
    condensed = widened.condense_rep_var()
    removed = widened.remove_rep_var()
    assert removed.replicate_size == 1
    for coord, _local in frag.enumerate():
        owners = widened.owners(coord)
        assert len(owners) == widened.replicate_size
        assert condensed.owners(coord) == owners
        (single,) = removed.owners(coord)
        assert single in owners


def _factorizations(total: int) -> st.SearchStrategy[list[int]]:
    """Shapes of ``total`` elements: 1-3 dims, each a divisor of what is left."""
    divisors = [d for d in range(1, total + 1) if total % d == 0]

    @st.composite
    def draw_shape(draw: st.DrawFn) -> list[int]:
        first = draw(st.sampled_from(divisors))
        rest = total // first
        second = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        return [first, second, rest // second]

    return draw_shape()


@SETTINGS
@given(st.data())
def test_reshaped_fragment_holds_each_element_where_the_original_does(data: st.DataObject) -> None:
    """numpy's reshape says which old element a new index names; it must have the same owners
    and the same local slot (a reshape is a view of the registers)."""
    base = data.draw(
        st.sampled_from(
            [mma_m16n8_c(), make_linear_fragment([8, 12], 32), make_linear_fragment([6, 4, 4], 8)]
        )
    )
    old_shape = list(base.const_input_shape())
    total = math.prod(old_shape)
    new_shape = data.draw(_factorizations(total))
    view = base.reshape(new_shape)
    positions = np.arange(total).reshape(new_shape)
    for new_coord in itertools.product(*(range(d) for d in new_shape)):
        old_coord = np.unravel_index(positions[new_coord], old_shape)
        old_coord = tuple(int(c) for c in old_coord)
        assert view.owners(new_coord) == base.owners(old_coord)
        assert [int(e) for e in view.map_forward_index(list(new_coord))] == [
            int(e) for e in base.map_forward_index(list(old_coord))
        ]
