"""T.cumsum on shared and fragment tiles, checked against numpy's cumsum (reverse via flips)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tile.lang as tilelang
import tile.lang.language as T


def reference(x, dim, reverse, dtype):
    acc = np.flip(x, dim) if reverse else x
    out = np.cumsum(acc.astype("float64"), axis=dim)
    return (np.flip(out, dim) if reverse else out).astype(dtype)


def cumsum_kernel(shape, dtype, dim, reverse, in_place, scope):
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def scan(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=32) as _bx:
            S = alloc(shape, dtype)
            T.copy(X, S)
            if in_place:
                T.cumsum(S, dim=dim, reverse=reverse)
                T.copy(S, Y)
            else:
                D = T.alloc_fragment(shape, dtype)
                T.cumsum(S, D, dim=dim, reverse=reverse)
                T.copy(D, Y)

    return scan


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    dim = draw(st.integers(-rank, rank - 1))
    return shape, dim


@settings(max_examples=12, deadline=None)
@given(
    case=cases(),
    dtype=st.sampled_from(["float32", "int32", "float16"]),
    reverse=st.booleans(),
    in_place=st.booleans(),
    scope=st.sampled_from(["shared", "fragment"]),
)
def test_cumsum_matches_numpy(case, dtype, reverse, in_place, scope):
    shape, dim = case
    kernel = tilelang.compile(
        cumsum_kernel(shape, dtype, dim, reverse, in_place, scope), out_idx=[-1], target="cpu"
    )
    rng = np.random.default_rng(sum(shape) + dim)
    # small integers keep every partial sum exact in float16 too
    x = rng.integers(-4, 5, size=shape).astype(dtype)
    np.testing.assert_array_equal(kernel(x), reference(x, dim % len(shape), reverse, dtype))


def test_cumsum_of_a_slice_writes_only_that_slice():
    M, N = 6, 10

    @T.prim_func
    def partial(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            S = T.alloc_shared((M, N), "float32")
            T.copy(X, S)
            T.cumsum(S[1:5, 2:9], dim=1)
            T.copy(S, Y)

    kernel = tilelang.compile(partial, out_idx=[-1], target="cpu")
    x = np.random.default_rng(0).standard_normal((M, N)).astype("float32")
    ref = x.copy()
    ref[1:5, 2:9] = np.cumsum(x[1:5, 2:9], axis=1)
    np.testing.assert_allclose(kernel(x), ref, rtol=1e-5, atol=1e-6)


def test_cumsum_per_block_rows_of_a_tensor():
    """TileLang-style: each block scans its row tile of a larger tensor."""
    M, N, bm = 40, 24, 16

    @T.prim_func
    def rows(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=64) as bx:
            S = T.alloc_shared((bm, N), "float32")
            T.copy(X[bx * bm, 0], S)
            T.cumsum(S, dim=1)
            T.copy(S, Y[bx * bm, 0])

    kernel = tilelang.compile(rows, out_idx=[-1], target="cpu")
    x = np.random.default_rng(1).standard_normal((M, N)).astype("float32")
    np.testing.assert_allclose(kernel(x), np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)
