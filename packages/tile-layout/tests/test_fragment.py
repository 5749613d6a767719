"""Fragment: construction forms, the four primitives of paper Fig. 6, ownership and errors."""

from __future__ import annotations

from typing import Any

import pytest
from tvm import tirx

from tile.layout import Fragment, Layout, LayoutError, make_fully_replicated, make_linear_fragment
from tile.layout.hardware import ldmatrix_fragment, mma_m16n8_c, mma_m16n8k16_a


def c_fragment() -> Fragment:
    return Fragment([16, 8], forward_fn=lambda i, j: (i % 8 * 4 + j // 2, i // 8 * 2 + j % 2))


def test_forward_fn_and_split_form_agree() -> None:
    split = Fragment(
        [16, 8],
        forward_thread_fn=lambda i, j: i % 8 * 4 + j // 2,
        forward_index_fn=lambda i, j: [i // 8 * 2 + j % 2],
    )
    assert split.is_equal(c_fragment())
    assert split == mma_m16n8_c()


def test_queries() -> None:
    frag = c_fragment()
    assert int(frag.get_thread_size()) == 32 and frag.locals_per_thread() == 4
    assert frag.replicate_size == 1
    assert str(frag.thread) == "i % 8 * 4 + j // 2"
    assert int(frag.map_forward_thread([9, 3])) == 5
    assert [int(e) for e in frag.map_forward_index([9, 3])] == [3]
    assert frag.owners((9, 3)) == [5]
    assert frag.is_bijective()
    inv = frag.inverse()  # (thread, local) -> coord
    assert [int(e) for e in inv.map_forward_index([5, 3])] == [9, 3]
    assert "32 threads" in repr(frag)


def test_figure7_bias_is_replicated_over_the_threads_of_a_row() -> None:
    # Paper Fig. 7: C is 4x4 over 8 threads, 2 elements each; a row is split over 2 threads,
    # so the bias D[i] must be held by both: a 1-d fragment with replicate=2.
    c = Fragment([4, 4], forward_fn=lambda i, j: (i * 2 + j // 2, j % 2))
    d = Fragment([4], forward_thread_fn=lambda i, rep: i * 2 + rep, forward_index_fn=lambda i: 0, replicate=2)
    for i in range(4):
        assert d.owners((i,)) == sorted({c.owners((i, j))[0] for j in range(4)})
    assert (d.ownership_counts() == 2).all()


def test_figure6_block_layout_from_the_ldmatrix_base() -> None:
    # Paper Fig. 6: base m16k16 (one warp) -> repeat -> warp m32k16 -> repeat_on_thread -> 4 warps m128k16.
    base = mma_m16n8k16_a()
    warp = base.repeat([2, 1], repeat_on_thread=False)
    block = warp.repeat([4, 1], repeat_on_thread=True)
    assert [int(e) for e in warp.get_input_shape()] == [32, 16]
    assert warp.locals_per_thread() == 16 and int(warp.get_thread_size()) == 32
    assert [int(e) for e in block.get_input_shape()] == [128, 16]
    assert block.locals_per_thread() == 16 and int(block.get_thread_size()) == 128
    assert block.owners((37, 3)) == [32 + 4 * (37 % 8) + 3 // 2]  # warp 1 owns rows 32..63
    both = block.replicate(2)  # a second set of 4 warps holds the same A (e.g. two N halves)
    assert int(both.get_thread_size()) == 256 and both.owners((37, 3)) == [53, 53 + 128]


def test_repeat_orders_and_int_shorthand() -> None:
    base = ldmatrix_fragment(1)
    lower = base.repeat([2, 2], lower_dim_first=True)
    upper = base.repeat([2, 2], lower_dim_first=False)
    # Copy (1, 0) (rows 8.., cols 0..) is copy number 1 with dim 0 fastest, 2 otherwise.
    assert [int(e) for e in lower.map_forward_index([8, 0])] == [2]
    assert [int(e) for e in upper.map_forward_index([8, 0])] == [4]
    assert base.repeat(2).is_equal(base.repeat([2, 1]))
    with pytest.raises(LayoutError):
        base.repeat([2])
    with pytest.raises(LayoutError):
        base.repeat([0, 1])


def test_replicate_condense_and_remove() -> None:
    frag = c_fragment().replicate(4)
    assert frag.replicate_size == 4 and int(frag.get_thread_size()) == 128
    assert frag.owners((0, 0)) == [0, 32, 64, 96]
    assert frag.condense_rep_var() is frag  # the thread reads all of rep already
    one = frag.remove_rep_var()
    assert one.replicate_size == 1 and one.owners((0, 0)) == [0]
    # A thread that reads only rep // 2: 4 replicas but 2 distinct owners.
    half = Fragment([4, 4], forward_fn=lambda i, j, rep: (i * 2 + rep // 2, j), replicate=4)
    condensed = half.condense_rep_var()
    assert condensed.replicate_size == 2
    assert all(half.owners((i, j)) == condensed.owners((i, j)) for i in range(4) for j in range(4))
    ignores = Fragment([4], forward_fn=lambda i, rep: (i, 0), replicate=8)
    assert ignores.condense_rep_var().replicate_size == 1
    # not affine, but every replica on its own thread: nothing to condense
    distinct = Fragment([4], forward_fn=lambda i, rep: (tirx.bitwise_xor(i, rep), 0), replicate=4)
    assert distinct.condense_rep_var() is distinct
    # not affine, and replicas share threads: refused
    non_affine = Fragment([4], forward_fn=lambda i, rep: (tirx.bitwise_xor(i, rep // 2), 0), replicate=4)
    with pytest.raises(LayoutError, match="affine"):
        non_affine.condense_rep_var()


@pytest.mark.parametrize(
    ("modulus", "shift", "true_extent"),
    [(256, 0, 2), (512, 1, 4), (128, 0, 1), (1024, 0, 8)],
)
def test_condense_a_window_of_a_fused_replica(modulus: int, shift: int, true_extent: int) -> None:
    # A reduction's result over 8 dropped rows of a 256-thread tile: rep, i and j fused,
    # then cut by a modulus (and a shift) so only part of rep names distinct threads.
    def thread(i: Any, j: Any, rep: Any) -> Any:
        return tirx.floordiv(tirx.floormod(rep * 128 + i * 32 + j, modulus), 1 << shift)

    frag = Fragment([4, 32], forward_thread_fn=thread, forward_index_fn=lambda i, j: 0, replicate=8)
    condensed = frag.condense_rep_var()
    assert condensed.replicate_size == true_extent
    for i in range(4):
        for j in range(32):
            every = {((r * 128 + i * 32 + j) % modulus) >> shift for r in range(8)}  # by hand
            assert sorted(every) == sorted(set(condensed.owners((i, j))))
            assert len(condensed.owners((i, j))) == true_extent


def test_bind_thread_range_for_a_consumer_warpgroup() -> None:
    frag = c_fragment().repeat([4, 1], repeat_on_thread=True)  # 128 threads
    bound = frag.bind_thread_range(128, 128)
    assert bound.thread_range is not None and int(bound.thread_range[0]) == 128
    assert bound.owners((0, 0)) == [128]
    with pytest.raises(LayoutError, match="more than the range"):
        frag.bind_thread_range(0, 64)


def test_helpers() -> None:
    full = make_fully_replicated([2, 3], 4)
    assert full.replicate_size == 4 and full.owners((1, 2)) == [0, 1, 2, 3] and full.locals_per_thread() == 6
    assert make_fully_replicated([4], 1).owners((3,)) == [0]
    lin = make_linear_fragment([4, 8], 16)
    assert int(lin.map_forward_thread([1, 2])) == 10 and lin.locals_per_thread() == 2
    assert lin.is_bijective()
    with pytest.raises(LayoutError, match="evenly"):
        make_linear_fragment([3, 3], 4)


def test_compose_with_a_layout_reindexes_the_tile() -> None:
    transpose = Layout([8, 16], lambda n, m: [m, n])
    frag = c_fragment().compose(transpose)
    assert isinstance(frag, Fragment)
    assert frag.owners((3, 9)) == c_fragment().owners((9, 3))
    with pytest.raises(LayoutError):
        c_fragment().compose(Layout([4, 4], lambda i, j: [i, j]))


def test_fragment_and_layout_are_never_equal() -> None:
    frag = c_fragment()
    layout = Layout([16, 8], lambda i, j: i // 8 * 2 + j % 2)
    assert not frag.is_equal(layout) and not layout.is_equal(frag)
    assert not frag.is_equal(frag.replicate(2))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"forward_fn": lambda i: (i, i), "forward_thread_fn": lambda i: i},
        {"forward_fn": lambda i: i},
        {"forward_fn": lambda i: (i, i), "replicate": 0},
        {"forward_fn": lambda i: ([i, i], i)},
    ],
)
def test_bad_fragments_raise_layout_error(kwargs) -> None:
    with pytest.raises(LayoutError):
        Fragment([4], **kwargs)


def _slots(frag: Fragment) -> dict[tuple[tuple[int, ...], int], int]:
    return {(coord, thread): local[0] for coord, _rep, thread, local in frag.enumerate_threads()}


def test_compact_index_renumbers_sparse_rows_of_the_mma_accumulator() -> None:
    # rows of the m16n8 C fragment stacked twice over registers (a 32x8 warp tile), the
    # column fixed at 0: locals 0, 2, 4, 6 of each lane's 8 -> dense 0..3
    acc = c_fragment().repeat([2, 1])
    rows = Fragment(
        [32],
        forward_thread_fn=lambda i, rep: acc.map_forward_thread([i, rep * 2], 0),
        forward_index_fn=lambda i: acc.map_forward_index([i, 0]),
        replicate=4,
    )
    assert rows.locals_per_thread() == 7
    dense = rows.compact_index()
    assert dense.locals_per_thread() == 4
    before, after = _slots(rows), _slots(dense)
    assert before.keys() == after.keys()  # same owners of every element
    for thread in range(32):  # per thread: distinct slots, in the same order, with no holes
        mine = sorted((before[k], after[k]) for k in before if k[1] == thread)
        assert [a for _, a in mine] == list(range(4))
    dense.replicate(1).remove_rep_var()  # still a well-formed fragment


def test_compact_index_keeps_dense_or_unparsable_fragments() -> None:
    frag = c_fragment()
    assert frag.compact_index() is frag
    swizzled = Fragment([8, 8], forward_fn=lambda i, j: (i, tirx.bitwise_xor(j, i) * 2))
    assert swizzled.compact_index() is swizzled  # not a sum of splits: left alone


def test_owner_layout_inverse_names_every_replica() -> None:
    # Fig. 7's bias, 4 rows over 8 threads with replicate=2: thread t holds row t // 2 in
    # replica t % 2 at local 0; the owner layout's inverse must say so for every thread.
    d = Fragment([4], forward_thread_fn=lambda i, rep: i * 2 + rep, forward_index_fn=lambda i: 0, replicate=2)
    owner = d.owner_layout()
    assert [int(e) for e in owner.get_input_shape()] == [4, 2]
    inverse = owner.inverse()
    for t in range(8):
        assert [int(e) for e in inverse.map_forward_index([t, 0])] == [t // 2, t % 2]
    # A block fragment replicated over a second set of warps: each (thread, local) names
    # the element enumerate_threads lists for it.
    both = mma_m16n8k16_a().replicate(2)
    inverse = both.owner_layout().inverse()
    for coord, rep, thread, local in both.enumerate_threads():
        assert [int(e) for e in inverse.map_forward_index([thread, *local])] == [*coord, rep]


def test_a_fragment_without_an_index_function_gives_every_element_a_register() -> None:
    frag = Fragment([4, 8], forward_thread_fn=lambda i, j: i)
    assert frag.locals_per_thread() == 32 and int(frag.get_thread_size()) == 4
    slots = {(t, loc) for _c, _r, t, loc in frag.enumerate_threads()}
    assert len(slots) == 32  # no two elements share a (thread, register)
    again = Fragment([4, 8], forward_thread_fn=lambda a, b: a)
    assert frag.is_equal(again)
    assert not frag.is_equal(Fragment([4, 8], forward_thread_fn=lambda i, j: j))


def test_condensing_a_replication_that_is_not_an_iterator_map_keeps_distinct_owners() -> None:
    # row i of a 5-wide statistic on threads rep * 16 + i (rep < 7): affine in rep, but i < 5
    # does not fill the 16-thread stride, so TVM's iterator maps do not parse it
    frag = Fragment([5], forward_thread_fn=lambda i, rep: rep * 16 + i, replicate=7,
                    forward_index_fn=lambda i: 0)
    condensed = frag.condense_rep_var()
    assert condensed.replicate_size == 7
    for i in range(5):
        assert condensed.owners((i,)) == [r * 16 + i for r in range(7)]
