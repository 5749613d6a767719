"""Helpers shared by the fragment table tests: fragment -> {(thread, local): coord}."""

from __future__ import annotations

from collections.abc import Callable

from tile.layout import Fragment

Table = dict[tuple[int, int], tuple[int, ...]]


def fragment_table(frag: Fragment) -> Table:
    """Every (thread, local) slot of an unreplicated, 1-d-indexed fragment -> its coord."""
    table: Table = {}
    for coord, rep, thread, local in frag.enumerate_threads():
        assert rep == 0 and len(local) == 1
        assert (thread, local[0]) not in table, f"slot {(thread, local[0])} holds two elements"
        table[(thread, local[0])] = coord
    return table


def oracle_table(fn: Callable[[int, int], tuple[int, ...]], threads: int, elems: int) -> Table:
    """``fn(thread, element) -> coord`` tabulated over every thread and element."""
    return {(t, i): tuple(fn(t, i)) for t in range(threads) for i in range(elems)}
