"""A reduction's result reduced again: the source fragment is replicated.

``T.reduce_sum(x, acc, dim=0)`` of a ``(64, 128)`` tile in a 256-thread block leaves the
128 column sums on twice as many threads as there are columns: each sum is held by two
threads (a replicated fragment). TileLang's DSA HISA pooling (examples/dsa_hisa,
fp8_block_mean_pooling.py) then takes ``T.reduce_absmax(acc, max_abs, dim=0)`` of it for
the block's fp8 scale; tile refused that on every GPU target ("T.reduce_absmax of the
replicated fragment acc is not supported"). Only one copy of each element may count (a sum
over both copies would be twice the answer), and every copy's holder must get the result.

References: numpy sums and maxima of the same data.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]

ROWS, COLS, THREADS = 64, 128, 256


@T.prim_func
def column_stats(X: T.Tensor((ROWS, COLS), "float32"), Out: T.Tensor((4, COLS), "float32")):
    with T.Kernel(1, threads=THREADS):
        x = T.alloc_fragment((ROWS, COLS), "float32")
        col = T.alloc_fragment((COLS,), "float32")
        total = T.alloc_fragment((1,), "float32")
        peak = T.alloc_fragment((1,), "float32")
        magnitude = T.alloc_fragment((1,), "float32")
        T.copy(X, x)
        T.reduce_sum(x, col, dim=0)
        T.reduce_sum(col, total, dim=0)
        T.reduce_max(col, peak, dim=0)
        T.reduce_absmax(col, magnitude, dim=0, clear=True)
        for j in T.Parallel(COLS):
            Out[0, j] = col[j]
            Out[1, j] = total[0]
            Out[2, j] = peak[0]
            Out[3, j] = magnitude[0]


@T.prim_func
def plane_row_sums(X: T.Tensor((8, 4, 32), "float32"), Out: T.Tensor((2, 4), "float32")):
    with T.Kernel(1, threads=THREADS):
        x = T.alloc_fragment((8, 4, 32), "float32")
        plane = T.alloc_fragment((4, 32), "float32")
        rows = T.alloc_fragment((4,), "float32")
        low = T.alloc_fragment((4,), "float32")
        T.copy(X, x)
        T.reduce_sum(x, plane, dim=0)
        T.fill(rows, 1.0)
        T.reduce_sum(plane, rows, dim=1, clear=False)  # adds onto the ones
        T.reduce_min(plane, low, dim=1)
        for i in T.Parallel(4):
            Out[0, i] = rows[i]
            Out[1, i] = low[i]


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    # small integers: every sum is exact in float32, whatever the order
    return np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_of_a_column_sum(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")  # GPU targets run on the emulator here
    x = _data((ROWS, COLS), 1)
    x[:, 5] = -40.0  # the largest magnitude is a negative column sum
    out = np.zeros((4, COLS), np.float32)
    tilelang.compile(column_stats, target=target)(x, out)
    col = x.sum(axis=0)
    np.testing.assert_array_equal(out[0], col)
    np.testing.assert_array_equal(out[1], np.full(COLS, col.sum()))  # twice this if both copies counted
    np.testing.assert_array_equal(out[2], np.full(COLS, col.max()))
    np.testing.assert_array_equal(out[3], np.full(COLS, np.abs(col).max()))


@pytest.mark.parametrize("target", TARGETS)
def test_row_reductions_of_a_plane_sum(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    x = _data((8, 4, 32), 2)
    out = np.zeros((2, 4), np.float32)
    tilelang.compile(plane_row_sums, target=target)(x, out)
    plane = x.sum(axis=0)
    np.testing.assert_array_equal(out[0], 1.0 + plane.sum(axis=1))
    np.testing.assert_array_equal(out[1], plane.min(axis=1))
