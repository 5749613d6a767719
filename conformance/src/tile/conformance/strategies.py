"""Shared hypothesis strategies: shapes, block sizes and dtypes a backend declares.

Vendors reuse these to check their own backends. Shapes deliberately include primes
and sizes that are not multiples of the block, so tails are always exercised.

Example::

    from hypothesis import given
    from tile.conformance import strategies as ts

    @given(shape=ts.shapes_2d(), block=ts.blocks_2d())
    def test_something(shape, block): ...
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st

PRIMES = (1, 2, 3, 5, 7, 13, 31, 61, 97, 127, 131)
#: Sizes of interest: primes, one off powers of two, and powers of two.
EDGE_SIZES = (*PRIMES, 15, 16, 17, 33, 63, 64, 65, 128, 129, 200, 256)


def dims(max_size: int = 300) -> st.SearchStrategy[int]:
    """One tensor dimension: edge sizes first, then anything in range."""
    edge = [s for s in EDGE_SIZES if s <= max_size]
    return st.one_of(st.sampled_from(edge), st.integers(1, max_size))


def shapes_2d(max_size: int = 300) -> st.SearchStrategy[tuple[int, int]]:
    """A 2-D tensor shape."""
    return st.tuples(dims(max_size), dims(max_size))


def blocks_2d(choices: Iterable[int] = (1, 4, 8, 16, 32, 64, 128)) -> st.SearchStrategy[tuple[int, int]]:
    """A 2-D tile (block) shape made of powers of two."""
    values = sorted(set(choices))
    return st.tuples(st.sampled_from(values), st.sampled_from(values))


def dtypes(supported: Iterable[str], wanted: Iterable[str]) -> st.SearchStrategy[str]:
    """The element types in ``wanted`` that the backend declares in ``supported``."""
    usable = sorted(set(wanted) & set(supported))
    if not usable:
        raise ValueError(f"none of {sorted(set(wanted))} is supported by the backend")
    return st.sampled_from(usable)
