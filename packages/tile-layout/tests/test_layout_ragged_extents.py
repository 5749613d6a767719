"""Affine analysis of fragments whose extents the ``//`` and ``%`` divisors do not divide.

A 16 x 333 tile over 128 threads puts column ``j`` on threads ``... + j % 16``: TVM's
iterator maps refuse ``j % 16`` for ``j < 333``, so ``rep_splits`` and the guarded inverse
parse it over the padded range and keep the result only when it is exact. Checked against
brute-force enumeration.
"""

from __future__ import annotations

import itertools

import pytest

from tile.layout import Fragment, Layout
from tile.layout._tvm import const as tvm_const
from tile.layout._tvm import substitute
from tile.layout.errors import LayoutError


def _owners(frag: Fragment) -> dict[tuple[int, ...], set[int]]:
    out: dict[tuple[int, ...], set[int]] = {}
    for coord, _rep, thread, _local in frag.enumerate_threads():
        out.setdefault(tuple(coord), set()).add(int(thread))
    return out


@pytest.mark.parametrize(("rows", "extent", "width"), [(16, 333, 16), (4, 37, 8), (8, 20, 16)])
def test_condense_keeps_the_owners_of_a_ragged_replication(rows: int, extent: int, width: int) -> None:
    # row i lives on `width` consecutive threads; rep stands for the reduced column
    frag = Fragment(
        [rows],
        forward_thread_fn=lambda i, rep: i * width + rep % width,
        forward_index_fn=lambda i: 0,
        replicate=extent,
    )
    condensed = frag.condense_rep_var()
    assert condensed.replicate_size == min(width, extent)
    assert _owners(condensed) == _owners(frag)
    want = {(i,): {i * width + c % width for c in range(extent)} for i in range(rows)}
    assert _owners(condensed) == want


def test_a_padded_parse_that_names_missing_replicas_is_not_used() -> None:
    # rep // 4 + rep % 4 * 8 over rep < 6: the padded parse (rep < 8) has replicas 6, 7, which
    # do not exist, so a result built from it would name threads that hold nothing. The six
    # real replicas sit on distinct threads, so the fragment stays as it is.
    frag = Fragment(
        [2],
        forward_thread_fn=lambda i, rep: i * 32 + rep // 4 + rep % 4 * 8,
        forward_index_fn=lambda i: 0,
        replicate=6,
    )
    condensed = frag.condense_rep_var()
    assert condensed.replicate_size == 6
    assert condensed.owners((1,)) == sorted(32 + r // 4 + r % 4 * 8 for r in range(6))
    # the same parse with two replicas on one thread cannot be condensed: refused
    shared = Fragment(
        [2],
        forward_thread_fn=lambda i, rep: i * 32 + rep // 4 + rep % 4 * 8 - rep // 5 * 9,
        forward_index_fn=lambda i: 0,
        replicate=6,
    )
    with pytest.raises(LayoutError, match="not affine"):
        shared.condense_rep_var()


@pytest.mark.parametrize(("rows", "cols", "r", "c"), [(16, 333, 8, 16), (5, 7, 2, 4), (12, 50, 4, 8)])
def test_guarded_inverse_of_a_ragged_row_split(rows: int, cols: int, r: int, c: int) -> None:
    per_row = -(-cols // c)
    layout = Layout(
        [rows, cols],
        lambda i, j: (i % r * c + j % c, i // r * per_row + j // c),
    )
    inverse, guard = layout.inverse_with_guard()
    threads, locals_ = (int(d) for d in layout.get_output_shape())
    seen = set()
    for t, k in itertools.product(range(threads), range(locals_)):
        ok, i, j = _at(inverse, [guard, *inverse.get_forward_index()], t, k)
        hit = i < rows and j < cols and (i % r * c + j % c, i // r * per_row + j // c) == (t, k)
        assert bool(ok) == hit, (t, k)
        if ok:
            seen.add((i, j))
    assert seen == set(itertools.product(range(rows), range(cols)))


def _at(inverse: Layout, exprs: list[object], t: int, k: int) -> list[int]:
    from tvm import sym  # type: ignore[import-untyped]

    o0, o1 = inverse.get_forward_vars()
    table = {o0: tvm_const(t), o1: tvm_const(k)}
    return [int(sym.Analyzer().simplify(substitute(e, table)).value) for e in exprs]
