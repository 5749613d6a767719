"""The default thread binding (``layout_rules.linear_fragment``) of grids the threads do not divide.

Checked by enumeration: every element has exactly one owner, no two elements share a
(thread, local) slot, and a reduction over the last dim can follow the binding
(``project_fragment`` condenses its owners). A 16 x 333 softmax tile used to fail there,
and so did a 16 x 24 row sum over 128 threads (128 divides 384, but the flat binding puts
row ``i`` on ``(24 i + col) % 128``).
"""

from __future__ import annotations

import math

import pytest

from tile.ir.ops.layout_rules import linear_fragment, project_fragment


def _slots(shape: list[int], threads: int) -> dict[tuple[int, ...], tuple[int, int]]:
    frag = linear_fragment(shape, threads)
    out: dict[tuple[int, ...], tuple[int, int]] = {}
    for coord, _rep, thread, local in frag.enumerate_threads():
        assert tuple(coord) not in out, coord  # one owner
        (index,) = local
        out[tuple(coord)] = (int(thread), int(index))
    return out


@pytest.mark.parametrize(
    ("shape", "threads"),
    [([16, 333], 128), ([3, 5], 128), ([100, 3], 128), ([64, 64], 128), ([2, 3, 77], 64), ([333], 128),
     ([16, 24], 128), ([32, 48], 128)],
)
def test_every_element_has_one_slot(shape: list[int], threads: int) -> None:
    slots = _slots(shape, threads)
    assert len(slots) == math.prod(shape)
    assert len(set(slots.values())) == len(slots)  # no shared register
    assert all(0 <= t < threads for t, _ in slots.values())


def test_a_ragged_tile_splits_rows_and_columns() -> None:
    slots = _slots([16, 333], 128)
    locals_ = 1 + max(local for _, local in slots.values())
    assert locals_ == 42  # ceil(16 * 333 / 128): nothing wasted beyond the last partial column step
    for i in range(16):
        owners = sorted({slots[(i, j)][0] for j in range(333)})
        assert owners == list(range(owners[0], owners[0] + 16))  # 16 consecutive threads per row
    assert slots[(0, 0)][0] + 1 == slots[(0, 1)][0]  # neighbouring columns on neighbouring threads


def test_rows_the_threads_do_not_divide_split_even_when_the_count_divides() -> None:
    slots = _slots([16, 24], 128)
    assert 1 + max(local for _, local in slots.values()) == 3  # 384 / 128: no register wasted
    for i in range(16):
        owners = sorted({slots[(i, j)][0] for j in range(24)})
        assert owners == list(range(8 * i, 8 * i + 8))  # 8 consecutive threads per row
    flat = _slots([16, 32], 128)  # 32 divides 128: the flat binding already keeps rows whole
    assert flat[(1, 5)] == (37, 0)


@pytest.mark.parametrize(
    ("shape", "threads"),
    [([16, 333], 128), ([100, 3], 128), ([2, 3, 77], 64), ([16, 24], 128), ([32, 48], 128), ([4, 40], 32)],
)
def test_a_row_reduction_follows_the_binding(shape: list[int], threads: int) -> None:
    slots = _slots(shape, threads)
    frag = linear_fragment(shape, threads)
    rows = project_fragment(frag, shape, list(range(len(shape) - 1)))
    got: dict[tuple[int, ...], set[int]] = {}
    for coord, _rep, thread, _local in rows.enumerate_threads():
        got.setdefault(tuple(coord), set()).add(int(thread))
    want: dict[tuple[int, ...], set[int]] = {}
    for coord, (thread, _local) in slots.items():
        want.setdefault(coord[:-1], set()).add(thread)
    assert got == want


@pytest.mark.parametrize(("shape", "threads"), [([16, 3], 128), ([7, 5], 128), ([3, 5], 128), ([1, 13], 64)])
def test_a_grid_smaller_than_the_threads_keeps_odd_rows_joinable(shape: list[int], threads: int) -> None:
    # 16 x 3 over 128 threads: the flat binding put row i on threads 3i .. 3i+2, which no xor
    # butterfly joins (a conformance reduction found it); each row's owners must now be an
    # aligned power-of-two group, and every reduction (rows or columns) must project.
    slots = _slots(shape, threads)
    assert len(set(slots.values())) == len(slots)
    for i in range(shape[0]):
        owners = sorted({slots[(i, j)][0] for j in range(shape[1])})
        group = 1 << (len(owners) - 1).bit_length()
        assert owners[0] % group == 0 and owners[-1] < owners[0] + group, owners
    frag = linear_fragment(shape, threads)
    for kept in ([0], [1]):
        reduced = project_fragment(frag, shape, kept)
        got: dict[int, set[int]] = {}
        for coord, _rep, thread, _local in reduced.enumerate_threads():
            got.setdefault(coord[0], set()).add(int(thread))
        want: dict[int, set[int]] = {}
        for coord, (thread, _local) in slots.items():
            want.setdefault(coord[kept[0]], set()).add(thread)
        assert got == want


@pytest.mark.parametrize(
    ("m", "n", "k", "threads"), [(64, 64, 64, 128), (128, 128, 32, 256), (64, 256, 16, 256)]
)
def test_warpgroup_register_a_follows_the_ptx_operand_table(m: int, n: int, k: int, threads: int) -> None:
    # PTX ISA, wgmma register A (m64k16, 16-bit): warp w of the warpgroup holds rows 16w..16w+15
    # as mma.m16n8k16's A: lane = 4 * (row % 8) + (col % 8) // 2.
    from tile.ir.ops.layout_rules import warpgroup_a_fragment, warpgroup_partition

    frag = warpgroup_a_fragment(m, n, k, threads, "float16")
    assert frag is not None
    wg_m, wg_n = warpgroup_partition(m, n, threads // 128)
    part = m // wg_m
    owners: dict[tuple[int, int], set[int]] = {}
    for (i, kk), _rep, thread, _local in frag.enumerate_threads():
        owners.setdefault((i, kk), set()).add(int(thread))
    for i in range(m):
        for kk in range(k):
            lane = 4 * (i % 8) + (kk % 8) // 2
            in_group = (i % part) % 64 // 16 * 32 + lane
            want = {(i // part * wg_n + g) * 128 + in_group for g in range(wg_n)}
            assert owners[(i, kk)] == want, (i, kk)
