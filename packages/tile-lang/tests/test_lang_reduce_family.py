"""T.reduce_sum/max/min/abssum/absmax on every dim of 1-D/2-D/3-D tiles, vs numpy.

``clear=False`` folds the destination's existing values into the result (TileLang's
semantics): ``sum`` adds to it, ``max``/``min`` compare with it, ``abssum`` adds the
absolute values to it (the old value itself is not made absolute), ``absmax`` takes
the max of it and the absolute values.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tile.lang as tilelang
import tile.lang.language as T

REDUCERS = {
    "sum": T.reduce_sum,
    "max": T.reduce_max,
    "min": T.reduce_min,
    "abssum": T.reduce_abssum,
    "absmax": T.reduce_absmax,
}


def reference(kind, x, axis, old):
    reduced = {
        "sum": lambda: x.sum(axis),
        "max": lambda: x.max(axis),
        "min": lambda: x.min(axis),
        "abssum": lambda: np.abs(x).sum(axis),
        "absmax": lambda: np.abs(x).max(axis),
    }[kind]()
    if old is None:
        return reduced
    if kind in ("sum", "abssum"):
        return old + reduced
    return np.maximum(old, reduced) if kind in ("max", "absmax") else np.minimum(old, reduced)


def reduce_kernel(kind, shape, dim, clear, dtype, scope, out_dtype=None):
    """``Y = reduce(X)`` folding in ``Old`` unless ``clear``; the destination (and ``Old``, ``Y``)
    is ``out_dtype`` (default: ``dtype``)."""
    out_dtype = out_dtype or dtype
    axis = dim % len(shape)
    out_shape = tuple(e for d, e in enumerate(shape) if d != axis) or (1,)
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment
    reducer = REDUCERS[kind]

    @T.prim_func
    def main(
        X: T.Tensor(shape, dtype), Old: T.Tensor(out_shape, out_dtype), Y: T.Tensor(out_shape, out_dtype)
    ):
        with T.Kernel(1, threads=32) as _bx:
            src = alloc(shape, dtype)
            dst = T.alloc_fragment(out_shape, out_dtype)
            T.copy(X, src)
            T.copy(Old, dst)
            reducer(src, dst, dim=dim, clear=clear)
            T.copy(dst, Y)

    return main, out_shape


@st.composite
def shapes_and_dims(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    return shape, draw(st.integers(-rank, rank - 1))


@settings(max_examples=24, deadline=None)
@given(
    kind=st.sampled_from(sorted(REDUCERS)),
    case=shapes_and_dims(),
    clear=st.booleans(),
    dtype=st.sampled_from(["float32", "int32", "float16"]),
    scope=st.sampled_from(["shared", "fragment"]),
)
def test_reduce_matches_numpy(kind, case, clear, dtype, scope):
    shape, dim = case
    func, out_shape = reduce_kernel(kind, shape, dim, clear, dtype, scope)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    rng = np.random.default_rng(len(shape) * 10 + dim)
    # small integers: every sum is exact in float16 and int32 alike
    x = rng.integers(-6, 7, size=shape).astype(dtype)
    old = rng.integers(-6, 7, size=out_shape).astype(dtype)
    ref = reference(
        kind, x, dim % len(shape), None if clear else old.reshape(out_shape if len(shape) > 1 else ())
    )
    np.testing.assert_array_equal(kernel(x, old), np.asarray(ref, dtype=dtype).reshape(out_shape))


@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
def test_clearing_reductions_ignore_the_destination(kind):
    """With clear=True the destination's old contents (here extreme values) never leak in."""
    func, _ = reduce_kernel(kind, (4, 5), 1, True, "float32", "fragment")
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    x = np.random.default_rng(0).standard_normal((4, 5)).astype("float32")
    old = np.full(4, -1e30 if kind == "min" else 1e30, "float32")
    np.testing.assert_array_equal(kernel(x, old), reference(kind, x, 1, None))


@pytest.mark.parametrize("kind,fill", [("max", -np.inf), ("min", np.inf)])
def test_rows_of_infinities_reduce_to_infinity(kind, fill):
    """A fully masked row (all -inf, as in causal attention) has max -inf, not the lowest float."""
    func, _ = reduce_kernel(kind, (3, 4), 1, True, "float32", "fragment")
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    x = np.zeros((3, 4), "float32")
    x[1] = fill
    np.testing.assert_array_equal(kernel(x, np.zeros(3, "float32")), reference(kind, x, 1, None))


def test_reduce_of_a_slice_into_a_slice():
    M, N = 8, 12

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            src = T.alloc_shared((M, N), "float32")
            dst = T.alloc_fragment((M,), "float32")
            T.fill(dst, -1.0)
            T.copy(X, src)
            T.reduce_sum(src[2:6, 3:10], dst[2:6], dim=1)
            T.copy(dst, Y)

    kernel = tilelang.compile(main, out_idx=[-1], target="cpu")
    x = np.random.default_rng(1).standard_normal((M, N)).astype("float32")
    ref = np.full(M, -1.0, "float32")
    ref[2:6] = x[2:6, 3:10].sum(1)
    np.testing.assert_allclose(kernel(x), ref, rtol=1e-5, atol=1e-5)


def test_reduce_fp16_source_into_fp32_accumulator():
    M, N = 6, 300
    func, _ = reduce_kernel("sum", (M, N), 1, True, "float16", "fragment", out_dtype="float32")
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    x = np.random.default_rng(2).standard_normal((M, N)).astype("float16")
    stale = np.full(M, 1e6, "float32")  # clear=True: the destination's old values must not count
    np.testing.assert_allclose(kernel(x, stale), x.astype("float32").sum(1), rtol=1e-5, atol=1e-4)
