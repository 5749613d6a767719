"""``T.Parallel`` nests whose extents are known only at run time, on the CUDA emulator.

Such a nest has no fragment to bind it to threads (TileLang's issue 1008: ``T.fill(x[a:b], 0)``
with ``a``, ``b`` variables, "a T.Parallel loop with symbolic extents cannot be thread-bound");
``tile.ir.transform.bind_parallel_loops`` deals its iterations to the block's threads in turn.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _emu_targets import TARGETS

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
CUDA = TARGETS[0].values[0]


def scale_rows_kernel(threads: int) -> Any:
    """``B[r, c] = 2 * A[r, c] + r`` over rows ``[1, n - 1)`` and 3 columns, ``n`` symbolic: a
    two-loop nest with a start offset, run by every thread; the same into ``H`` by the threads
    ``tx < threads // 2`` only."""
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((n, 3), "float32"), B: T.Tensor((n, 3), "float32"), H: T.Tensor((n, 3), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0)
            for r, c in T.Parallel(n - 2, 3):
                B[r + 1, c] = A[r + 1, c] * 2.0 + T.cast(r + 1, "float32")
            if tx < threads // 2:
                for r, c in T.Parallel(n - 2, 3):
                    H[r + 1, c] = A[r + 1, c] * 2.0 + T.cast(r + 1, "float32")

    return main


def test_symbolic_parallel_nest_matches_numpy() -> None:
    kernel = tilelang.compile(scale_rows_kernel(128), target=CUDA)
    for n in (3, 130):  # fewer iterations than threads, and several per thread
        a = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        b, h = np.full((n, 3), -1.0, np.float32), np.full((n, 3), -1.0, np.float32)
        expected = b.copy()
        expected[1:-1] = a[1:-1] * 2 + np.arange(1, n - 1, dtype=np.float32)[:, None]
        kernel(a, b, h)
        np.testing.assert_array_equal(b, expected)
        np.testing.assert_array_equal(h, expected)


def fill_range_kernel() -> Any:
    """``T.fill(X[lo:hi], 7)`` with ``lo``, ``hi`` read from a tensor (issue 1008's form)."""
    n = T.symbolic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "int64"), R: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=32):
            lo, hi = T.alloc_var(T.int32), T.alloc_var(T.int32)
            lo = R[0]
            hi = R[1]
            T.fill(X[lo:hi], 7)

    return main


def test_fill_of_a_runtime_range_matches_numpy() -> None:
    kernel = tilelang.compile(fill_range_kernel(), target=CUDA)
    x = np.zeros(100, np.int64)
    kernel(x, np.array([5, 77], np.int32))
    expected = np.zeros(100, np.int64)
    expected[5:77] = 7
    np.testing.assert_array_equal(x, expected)


def test_symbolic_nest_under_a_non_range_condition_is_refused() -> None:
    """Only even threads run the nest: dealt to every thread, odd threads' turns would be lost."""
    n = T.symbolic("n")

    @T.prim_func
    def main(B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            if tx % 2 == 0:
                for i in T.Parallel(n):
                    B[i] = 1.0

    with pytest.raises(UnsupportedOnTargetError, match="symbolic extents"):
        tilelang.compile(main, target=CUDA)
