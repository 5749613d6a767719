"""Every T.reduce_* kind on every dim of 2-D shared and fragment tiles, with and without clear.

The batch dim B is ``T.dynamic``: one compiled kernel per (kind, dim, clear, dtype,
tile, scope) serves every drawn B, so data and batch vary at no compile cost.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts

REDUCERS = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min,
            "abssum": T.reduce_abssum, "absmax": T.reduce_absmax}
TILES = ((4, 8), (7, 5), (16, 3), (1, 13))

DTYPES = ("float32", "int32", "float16")


def reduce_kernel(kind: str, tile: tuple[int, int], dim: int, clear: bool, dtype: str, scope: str,
                  threads: int = 32):
    B = T.dynamic("B")
    R, C = tile
    out = C if dim % 2 == 0 else R
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment
    reducer = REDUCERS[kind]

    @T.prim_func
    def main(X: T.Tensor((B, R, C), dtype), Old: T.Tensor((B, out), dtype), Y: T.Tensor((B, out), dtype)):
        with T.Kernel(B, threads=threads) as bx:
            src = alloc((R, C), dtype)
            dst = T.alloc_fragment((out,), dtype)
            T.copy(X[bx, 0:R, 0:C], src)
            T.copy(Old[bx, 0:out], dst)
            reducer(src, dst, dim=dim, clear=clear)
            T.copy(dst, Y[bx, 0:out])

    return main


def reference(kind: str, x: np.ndarray, axis: int, old: np.ndarray, clear: bool) -> np.ndarray:
    reduced = ref.reduce(kind, x, axis)
    return reduced if clear else ref.reduce_into(kind, old, reduced)


@given(kind=st.sampled_from(ts.REDUCE_KINDS), tile=st.sampled_from(TILES), dim=st.sampled_from([0, 1, -1]),
       clear=st.booleans(), scope=st.sampled_from(["shared", "fragment"]), batch=st.integers(1, 9),
       seed=st.integers(0, 2**16), threads=st.sampled_from([32, 128]), data=st.data())
def test_reduce_kinds_and_dims(tile_backend, kind, tile, dim, clear, scope, batch, seed, threads,
                               data) -> None:
    # 128 threads: more than a (16, 3) tile's elements; its rows must still reduce (a row on
    # threads 3i .. 3i+2 was refused: no xor butterfly joins them)
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, DTYPES), label="dtype")
    kernel = tile_backend.build(reduce_kernel, kind, tile, dim, clear, dtype, scope, threads,
                                out_idx=(-1,))
    rng = np.random.default_rng(seed)
    x = ref.random_array(rng, (batch, *tile), dtype)
    axis = 1 + dim % 2
    old = ref.random_array(rng, (batch, tile[1] if axis == 1 else tile[0]), dtype)
    out = kernel(x, old)
    expected = reference(kind, x.astype(np.float64), axis, old.astype(np.float64), clear)
    ref.assert_close(out, expected, dtype, accumulate=max(tile), magnitude=2.0, accum_dtype=dtype)


def full_reduce_kernel(kind: str, n: int, clear: bool):
    """``Y[b] = reduce(X[b, :])``: a 1-D fragment reduced along its only dim into a ``(1,)`` fragment."""
    B = T.dynamic("B")
    reducer = REDUCERS[kind]

    @T.prim_func
    def main(X: T.Tensor((B, n), "float32"), Old: T.Tensor((B, 1), "float32"),
             Y: T.Tensor((B, 1), "float32")):
        with T.Kernel(B, threads=64) as bx:
            xs = T.alloc_fragment((n,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0:n], xs)
            T.copy(Old[bx, 0:1], s)
            reducer(xs, s, dim=0, clear=clear)
            T.copy(s, Y[bx, 0:1])

    return main


@pytest.mark.parametrize(("kind", "n", "clear"),
                         [("sum", 100, True), ("absmax", 256, False), ("min", 40, True)])
def test_full_reduction_of_a_1d_fragment(tile_backend, kind, n, clear) -> None:
    # Regression (issue 17): the GPU rule asked the (1,) destination's layout for 0 coordinates.
    kernel = tile_backend.build(full_reduce_kernel, kind, n, clear, out_idx=(-1,))
    rng = np.random.default_rng(n)
    x = ref.random_array(rng, (3, n), "float32")
    old = ref.random_array(rng, (3, 1), "float32")
    out = kernel(x, old)
    expected = reference(kind, x.astype(np.float64)[:, None, :], 2, old.astype(np.float64), clear)
    ref.assert_close(out, expected, "float32", accumulate=n, magnitude=2.0, accum_dtype="float32")


def centered_kernel(kind: str, n: int, threads: int):
    """``Y[b, :] = X[b, :] - reduce(X[b, :])``: the (1,) statistic read back by every iteration."""
    B = T.dynamic("B")
    reducer = REDUCERS[kind]

    @T.prim_func
    def main(X: T.Tensor((B, n), "float32"), Y: T.Tensor((B, n), "float32")):
        with T.Kernel(B, threads=threads) as bx:
            xs = T.alloc_fragment((n,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0:n], xs)
            reducer(xs, s, dim=0)
            for j in T.Parallel(n):
                xs[j] = xs[j] - s[0]
            T.copy(xs, Y[bx, 0:n])

    return main


@pytest.mark.parametrize(("kind", "n", "threads"), [("sum", 256, 128), ("max", 200, 128), ("sum", 64, 256)])
def test_a_full_reduction_read_back_by_every_iteration(tile_backend, kind, n, threads) -> None:
    # Regression: the (1,) result had no layout of its own, took one thread's, and a later
    # T.Parallel reading s[0] was refused on GPU targets (tile-ops' RMSNorm backward).
    kernel = tile_backend.build(centered_kernel, kind, n, threads, out_idx=(-1,))
    x = ref.random_array(np.random.default_rng(n), (3, n), "float32")
    expected = x.astype(np.float64) - reference(kind, x.astype(np.float64)[:, None, :], 2, None, True)
    ref.assert_close(kernel(x), expected, "float32", accumulate=n, magnitude=2.0, accum_dtype="float32")


def nan_reduce_kernel(rows: int, cols: int, dim: int, dtype: str):
    """``T.reduce_max``, ``_min`` and ``_absmax`` of one fragment along ``dim``, each with
    ``clear=True`` into ``Y[0:3]`` and with ``clear=False`` onto ``Old[3:6]`` into ``Y[3:6]``."""
    out = cols if dim == 0 else rows

    @T.macro
    def reduce_row(reducer, src, acc, Old, Y, k: int, clear: bool):
        T.copy(Old[k, :], acc)
        reducer(src, acc, dim=dim, clear=clear)
        T.copy(acc, Y[k, :])

    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), Old: T.Tensor((6, out), dtype), Y: T.Tensor((6, out), dtype)):
        with T.Kernel(1, threads=32) as _:
            src = T.alloc_fragment((rows, cols), dtype)
            acc = T.alloc_fragment((out,), dtype)
            T.copy(X, src)
            reduce_row(T.reduce_max, src, acc, Old, Y, 0, True)
            reduce_row(T.reduce_min, src, acc, Old, Y, 1, True)
            reduce_row(T.reduce_absmax, src, acc, Old, Y, 2, True)
            reduce_row(T.reduce_max, src, acc, Old, Y, 3, False)
            reduce_row(T.reduce_min, src, acc, Old, Y, 4, False)
            reduce_row(T.reduce_absmax, src, acc, Old, Y, 5, False)

    return main


def nan_rows(rows: int, cols: int) -> np.ndarray:
    """Integers with NaN beside each row's extreme, first, last, and a row of NaN only."""
    x = np.random.default_rng(7).integers(-80, 80, (rows, cols)).astype(np.float32)
    x[0, 10], x[0, 11] = 90, np.nan  # the NaN right after the maximum (the emulator's float16 lost 90)
    x[1, 10], x[1, 11] = np.nan, -90
    x[2, 0], x[2, -1] = np.nan, np.nan  # first and last
    x[3, :] = np.nan
    x[4, 1::2] = np.nan
    return x


# dim 1 runs the CPU's vector partials, dim 0 its generic rule; float16 is the GPUs' half max
@pytest.mark.parametrize(("dtype", "dim"), [("float32", 1), ("float16", 1), ("float32", 0)])
def test_max_min_absmax_skip_nan(tile_backend, dtype, dim) -> None:
    # without nan_propagate a NaN counts as the identity on every backend (fmax, as TileLang documents)
    if dtype not in tile_backend.capabilities.dtypes:
        pytest.skip(f"the backend declares no {dtype}")
    rows, cols = 6, 40  # 40 columns: the CPU's vector partials (32 lanes) and a serial tail
    x = nan_rows(rows, cols)
    out = cols if dim == 0 else rows
    old = np.random.default_rng(8).integers(-99, 99, (6, out)).astype(np.float32)
    old[:, ::4] = np.nan  # clear=False: a NaN already in the destination is skipped too
    kernel = tile_backend.build(nan_reduce_kernel, rows, cols, dim, dtype, out_idx=(-1,))
    got = np.asarray(kernel(x.astype(dtype), old.astype(dtype))).astype(np.float32)
    want = []
    for k in range(6):
        fold, identity = [(np.fmax, -np.inf), (np.fmin, np.inf), (np.fmax, 0.0)][k % 3]
        src = np.abs(x) if k % 3 == 2 else x
        start = np.full(out, identity) if k < 3 else np.where(np.isnan(old[k]), identity, old[k])
        want.append(fold(start, fold.reduce(np.where(np.isnan(src), identity, src), axis=dim)))
    np.testing.assert_array_equal(got, np.array(want, np.float32))
