"""Tile operators inside ``T.ws(g)`` / ``if tx < n:`` on the CPU emulator (TILE_DEVICE=emu).

A fragment whose every use (clear, gemm, copy, T.Parallel) sits inside one condition keeping
whole warps ``[a, b)`` of the block (hand-written warp specialization, TileLang's
``example_warp_specialize_gemm_copy_0_gemm_1``) is laid out over those threads, so the
gemm's warps are that range's warps. A fragment used both inside and outside such a range
would leave elements uncomputed: compiling it is a ``LayoutInferenceError`` naming the
fragment, the line and the threads. A T.Parallel nest on shared or global memory inside
``T.ws(g)`` is spread over that warpgroup's threads. Results are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import LayoutInferenceError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]

M = N = 64
K = 64
BK = 32


def _gemm(threads: int, consumer_group: int | None, clear_outside: bool = False) -> object:
    """C = 2 * (A @ B) on one block; with ``consumer_group`` set, the accumulator's clear,
    gemm, scaling and store run inside ``T.ws(consumer_group)`` only (as in TileLang's
    hand-written example), the clear outside it when ``clear_outside``."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, BK), "float16")
            B_s = T.alloc_shared((BK, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            if consumer_group is None:
                T.clear(acc)
                for ko in T.Pipelined(K // BK, num_stages=0):
                    T.copy(A[0, ko * BK], A_s)
                    T.copy(B[ko * BK, 0], B_s)
                    T.gemm(A_s, B_s, acc)
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] * 2.0
                T.copy(acc, C[0, 0])
            else:
                if clear_outside:
                    T.clear(acc)
                else:
                    with T.ws(consumer_group):
                        T.clear(acc)
                for ko in T.Pipelined(K // BK, num_stages=0):
                    with T.ws(1 - consumer_group if threads == 256 else consumer_group):
                        T.copy(A[0, ko * BK], A_s)
                        T.copy(B[ko * BK, 0], B_s)
                    T.sync_threads()
                    with T.ws(consumer_group):
                        T.gemm(A_s, B_s, acc)  # the line the error names
                    T.sync_threads()
                with T.ws(consumer_group):
                    for i, j in T.Parallel(M, N):
                        acc[i, j] = acc[i, j] * 2.0
                    T.copy(acc, C[0, 0])

    return gemm


def _operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(19)
    return rng.standard_normal((M, K)).astype("float16"), rng.standard_normal((K, N)).astype("float16")


def _check(kernel: object) -> None:
    a, b = _operands()
    want = 2.0 * (a.astype("float32") @ b.astype("float32"))
    np.testing.assert_allclose(kernel(a, b), want, rtol=1e-3, atol=2e-2)  # type: ignore[operator]


@pytest.mark.parametrize(("arch", "group"), [("sm_80", 1), ("sm_80", 0), ("sm_90a", 1)])
def test_fragment_used_by_one_warpgroup_is_laid_out_over_it(arch, group):
    # before: acc was spread over all 256 threads and half of C was never computed
    _check(tilelang.compile(_gemm(256, group), out_idx=[-1], target={"kind": "cuda", "arch": arch}))


def test_fragment_used_inside_and_outside_a_warpgroup_is_a_layout_error():
    with pytest.raises(LayoutInferenceError) as caught:
        tilelang.compile(
            _gemm(256, 1, clear_outside=True), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}
        )
    error = caught.value
    assert "fragment acc" in error.message and "threads [128, 256)" in error.message
    assert "threads [0, 256) of the 256-thread block" in error.message
    assert "threads=128" in error.hint
    assert error.location is not None and "T.gemm(A_s, B_s, acc)" in error.location.source_line


def test_same_gemm_without_ws_matches_numpy():
    _check(tilelang.compile(_gemm(128, None), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}))


def test_ws_covering_the_whole_block_matches_numpy():
    # threads=128: T.ws(0) keeps every thread, the fragment's users are the whole block
    _check(tilelang.compile(_gemm(128, 0), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}))


@T.prim_func
def _scaled_by_warpgroup_1(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((64, 64), "float32")
        with T.ws(1):  # only threads 128..255 fill the tile: the nest is spread over them
            for i, j in T.Parallel(64, 64):
                S[i, j] = A[i, j] * 3.0
        T.sync_threads()
        T.copy(S, B[0, 0])


def test_parallel_nest_on_shared_inside_ws_runs_on_that_warpgroup():
    a = np.random.default_rng(7).standard_normal((64, 64)).astype("float32")
    kernel = tilelang.compile(_scaled_by_warpgroup_1, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    np.testing.assert_array_equal(kernel(a), a * 3.0)


@T.prim_func
def _doubled_by_warpgroup_1(
    A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"), C: T.Tensor((2,), "float32")
):
    with T.Kernel(1, threads=256):
        tile = T.alloc_fragment((64, 64), "float32")
        with T.ws(1):  # tile lives on threads 128..255 only
            T.copy(A[0, 0], tile)
            for i, j in T.Parallel(64, 64):
                tile[i, j] = tile[i, j] * 2.0
            T.copy(tile, B[0, 0])
            C[1] = tile[5, 7]  # a store outside T.Parallel: run by the thread holding [5, 7]
        with T.ws(0):
            C[0] = 1.0


def test_owner_store_inside_ws_matches_numpy():
    a = np.random.default_rng(3).standard_normal((64, 64)).astype("float32")
    kernel = tilelang.compile(
        _doubled_by_warpgroup_1, out_idx=[-2, -1], target={"kind": "cuda", "arch": "sm_80"}
    )
    b, c = kernel(a)
    np.testing.assert_array_equal(b, a * 2.0)
    np.testing.assert_array_equal(c, [1.0, a[5, 7] * 2.0])
