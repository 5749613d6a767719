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

import dataclasses
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


# -- tile configs -----------------------------------------------------------------------

#: Operand scopes of T.gemm: s = shared, r = register fragment (A then B).
GEMM_SCOPES = ("ss", "rs", "sr", "rr")
WARP_POLICIES = ("Square", "FullRow", "FullCol")


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """Compile-time parameters of a tiled GEMM (hashable: kernels are cached per config)."""

    block_M: int
    block_N: int
    block_K: int
    threads: int
    num_stages: int
    policy: str
    trans_A: bool
    trans_B: bool
    scope: str


def gemm_configs(
    blocks: Iterable[tuple[int, int, int]] = ((16, 16, 16), (32, 16, 8), (16, 32, 16)),
    threads: Iterable[int] = (32, 128),
    stages: Iterable[int] = (1, 2, 3),
    scopes: Iterable[str] = GEMM_SCOPES,
) -> st.SearchStrategy[GemmConfig]:
    """Block sizes, thread counts, num_stages, warp policies, transposes and operand scopes.

    The defaults are small sets so that a run compiles few distinct kernels.
    """
    return st.builds(
        lambda blk, t, s, p, ta, tb, sc: GemmConfig(blk[0], blk[1], blk[2], t, s, p, ta, tb, sc),
        st.sampled_from(list(blocks)),
        st.sampled_from(list(threads)),
        st.sampled_from(list(stages)),
        st.sampled_from(WARP_POLICIES),
        st.booleans(),
        st.booleans(),
        st.sampled_from(list(scopes)),
    )


#: Reduction kinds of the T.reduce_* family.
REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")

#: Float8 storage types, used only where the backend declares them.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def small_shapes(rank: int, max_size: int = 9) -> st.SearchStrategy[tuple[int, ...]]:
    """A ``rank``-D tile shape with small extents (1 and primes included)."""
    return st.tuples(*[st.sampled_from([s for s in range(1, max_size + 1)])] * rank)


#: Swizzle annotations a layout test applies with T.annotate_layout / T.use_swizzle.
SWIZZLES = ("none", "swizzled", "use_swizzle")


def swizzles() -> st.SearchStrategy[str]:
    """A layout annotation to apply to a shared buffer."""
    return st.sampled_from(SWIZZLES)
