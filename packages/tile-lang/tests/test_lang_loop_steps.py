"""Loops with a negative step (``for i in range(10, 0, -1)``) count down as Python's range does.

TileLang's frontend_v2 tests write them; apache-tvm 0.27 refuses a non-positive step in its
IR checks (an internal error). Reference: Python's own ``range`` over the same bounds.
"""

# ruff: noqa: SIM113  (the counters are kernel code: a kernel loop has no enumerate())
from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
]


def python_order(bounds: list[tuple[int, int, int]], size: int) -> np.ndarray:
    """What the kernel below stores: slot ``t`` of loop ``l`` gets the ``t``-th value of its range."""
    out = np.full((len(bounds), size), -99, np.int32)
    for row, (start, stop, step) in enumerate(bounds):
        for t, value in enumerate(range(start, stop, step)):
            out[row, t] = value
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_negative_steps_follow_pythons_range(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    n = T.symbolic("n")

    @T.prim_func
    def down(A: T.Tensor((4, 16), "int32"), L: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=1):
            t = T.alloc_var("int32", 0)
            for i in range(10, 0, -1):
                A[0, t] = i
                t += 1
            t = 0
            for i in range(n, -1, -3):  # symbolic start: n, n - 3, ..., down to 0
                A[1, t] = i
                t += 1
            t = 0
            for i in range(2, 5, -1):  # no trips
                A[2, t] = i
                t += 1
            t = 0
            for i in range(3, 0, -1):
                for j in range(i, 0, -2):  # inner bounds from the outer counter
                    A[3, t] = i * 10 + j
                    t += 1
            L[0] = L[0]

    bounds = [(10, 0, -1), (13, -1, -3), (2, 5, -1)]
    a = np.full((4, 16), -99, np.int32)
    tilelang.compile(down, target=target)(a, np.zeros(13, np.int32))
    np.testing.assert_array_equal(a[:3], python_order(bounds, 16))
    nested = [i * 10 + j for i in range(3, 0, -1) for j in range(i, 0, -2)]
    np.testing.assert_array_equal(a[3, : len(nested)], nested)
    assert (a[3, len(nested) :] == -99).all()


@pytest.mark.parametrize("target", TARGETS)
def test_a_var_without_an_initializer_starts_at_zero(target, monkeypatch):
    # TileLang's T.alloc_var documents zero as the value without init=; its frontend test sums
    # 0..9 into one with a while loop (tile's variable was uninitialized: garbage)
    monkeypatch.setenv("TILE_DEVICE", "emu")

    @T.prim_func
    def summed(A: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=1):
            i = T.alloc_var(T.int32, 0)
            total = T.alloc_var(T.int32)
            other = T.alloc_var("int32", "local.var")  # TileLang's (dtype, scope) spelling
            while i < 10:
                total += i
                other += 2
                i += 1
            A[0] = total
            A[1] = other

    a = np.full(2, -7, np.int32)
    tilelang.compile(summed, target=target)(a)
    np.testing.assert_array_equal(a, [sum(range(10)), 20])
