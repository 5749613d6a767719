"""Tile operators in a block of several thread dims (``T.Kernel(..., threads=(32, 4))``).

As in TileLang, whose layout inference and operator lowering bind ``threadIdx.x`` alone, the
operators spread over ``threadIdx.x`` and every ``threadIdx.y`` group does the same work.
tile laid the tiles out over all 128 threads but bound ``threadIdx.x`` (0..31) only, and
lowered copies over the extent of ``threadIdx.y``: a fill reached a quarter of its tile and
the emulator returned 508 of 1024 elements wrong. The results are checked against numpy on
the CPU and both emulators.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="cuda-sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "hip", "mcpu": "gfx90a"}, id="rocm-gfx90a", marks=needs_backend("rocm")),
]
N = 32


@T.prim_func
def _fill_then_copy(A: T.Tensor((N, N), "float32"), B: T.Tensor((N, N), "float32")):
    with T.Kernel(1, threads=(32, 4)):
        S = T.alloc_shared((N, N), "float32")
        T.fill(S, -1.0)
        T.copy(A[0 : N // 2, 0:N], S[0 : N // 2, 0:N])  # the top half over the fill
        T.copy(S, B)


@T.prim_func
def _gemm_then_row_sums(
    A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64,), "float32")
):
    with T.Kernel(1, threads=(128, 2)):
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        sums = T.alloc_fragment((64,), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.clear(acc)
        T.gemm(A_s, B_s, acc)
        T.reduce_sum(acc, sums, dim=1)
        T.copy(sums, C)


def _compile(func, target, monkeypatch):
    if target != "cpu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
    return tilelang.compile(func, out_idx=[-1], target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_a_fill_and_copies_reach_the_whole_tile(target, monkeypatch):
    kernel = _compile(_fill_then_copy, target, monkeypatch)
    a = np.random.default_rng(5).standard_normal((N, N)).astype(np.float32)
    want = np.full((N, N), -1.0, np.float32)
    want[: N // 2] = a[: N // 2]
    np.testing.assert_array_equal(np.asarray(kernel(a)), want)


@pytest.mark.parametrize("target", TARGETS)
def test_a_gemm_and_a_reduction_run_on_thread_x(target, monkeypatch):
    kernel = _compile(_gemm_then_row_sums, target, monkeypatch)
    rng = np.random.default_rng(6)
    a = rng.integers(-2, 3, (64, 32)).astype(np.float16)
    b = rng.integers(-2, 3, (32, 64)).astype(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).sum(axis=1)
    np.testing.assert_array_equal(np.asarray(kernel(a, b)), want.astype(np.float32))
