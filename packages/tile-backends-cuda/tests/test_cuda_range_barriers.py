"""Shared-memory barriers inside ``T.ws(g)`` / ``if tx >= 128:``: named barriers of those threads.

Where a condition keeps a warp-aligned range of the block's threads and the shared-memory
accesses under it depend on each other (a warpgroup copies its own tile, then runs a gemm on
it), the barrier between them must wait for that range's threads only: ``__syncthreads()``
there would wait for threads that never reach it. tile plans ``bar.sync id, count`` with one
id per range (TileLang's ``example_warp_specialize_gemm_copy_gemm_0_1``). The kernels run on
the CPU emulator, which holds every named barrier until its ``count`` threads arrived, and
are compared with numpy; the source is checked for the ids and counts and compiled by nvcc.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tvm
from _cuda_lowering import lowered

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda import probe_nvcc
from tile.backends.cuda._src.codegen import generate
from tile.testsupport.markers import needs_host_cxx

M = N = 64
K = 64
BK = 32


@T.prim_func
def two_warpgroup_gemm(
    A: T.Tensor((M, K), "float16"), B: T.Tensor((K, 2 * N), "float16"), C: T.Tensor((M, 2 * N), "float32")
):
    """C = A @ B; warpgroup 1 computes the left half of C, warpgroup 0 the right half, each
    from the half of B it copies into its own shared tile."""
    with T.Kernel(1, threads=256):
        A_s = T.alloc_shared((M, BK), "float16")
        B_left = T.alloc_shared((BK, N), "float16")
        B_right = T.alloc_shared((BK, N), "float16")
        left = T.alloc_fragment((M, N), "float32")
        right = T.alloc_fragment((M, N), "float32")
        with T.ws(1):
            T.clear(left)
        with T.ws(0):
            T.clear(right)
        for ko in T.Pipelined(K // BK, num_stages=0):
            T.copy(A[0, ko * BK], A_s)
            with T.ws(1):
                T.copy(B[ko * BK, 0], B_left)
                T.gemm(A_s, B_left, left)  # after a barrier of threads 128..255
            with T.ws(0):
                T.copy(B[ko * BK, N], B_right)
                T.gemm(A_s, B_right, right)  # after a barrier of threads 0..127
        with T.ws(1):
            T.copy(left, C[0, 0])
        with T.ws(0):
            T.copy(right, C[0, N])


@T.prim_func
def upper_half_reverses(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    """Threads 128..255 stage 2 * A in shared memory and write it back reversed: each thread
    reads elements other threads of the range stored."""
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((64, 64), "float32")
        tx = T.get_thread_binding()
        if tx >= 128:
            for i, j in T.Parallel(64, 64):
                S[i, j] = A[i, j] * 2.0
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[63 - i, 63 - j]


def _source(func: object, arch: str) -> str:
    return generate(tvm.IRModule({"main": lowered(func, arch)}), arch)[0]


def _named_barriers(source: str) -> list[tuple[int, int]]:
    found = re.findall(r"tile_named_barrier_sync\((?:\(uint\))?(\d+), (?:\(uint\))?(\d+)\)", source)
    return [(int(i), int(n)) for i, n in found]


@pytest.mark.emu
@needs_host_cxx
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_warpgroups_copying_their_own_tiles_match_numpy(arch: str) -> None:
    # before: BackendError "a shared-memory barrier is needed inside a condition that
    # depends on the thread index"
    kernel = tilelang.compile(two_warpgroup_gemm, out_idx=[-1], target={"kind": "cuda", "arch": arch})
    rng = np.random.default_rng(19)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, 2 * N)).astype("float16")
    np.testing.assert_allclose(kernel(a, b), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=2e-2)


@pytest.mark.emu
@needs_host_cxx
def test_an_if_on_the_thread_index_syncs_its_128_threads() -> None:
    # a barrier waiting for 256 threads there would never open (the emulator reports a deadlock)
    kernel = tilelang.compile(upper_half_reverses, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    a = np.random.default_rng(5).standard_normal((64, 64)).astype("float32")
    np.testing.assert_array_equal(kernel(a), (a * 2.0)[::-1, ::-1])


def test_each_warpgroup_gets_its_own_named_barrier_of_128_threads() -> None:
    source = _source(two_warpgroup_gemm, "sm_80")
    barriers = _named_barriers(source)
    # one barrier per gemm, ids after __syncthreads' 0 and the consumers' 1, one per range
    assert sorted(barriers) == [(2, 128), (3, 128)]
    assert _named_barriers(_source(upper_half_reverses, "sm_80")) == [(2, 128)]


@T.prim_func
def user_named_barrier_too(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((64, 64), "float32")
        tx = T.get_thread_binding()
        T.sync_threads(2, 256)  # the user's id 2: the range barrier takes another
        if tx >= 128:
            for i, j in T.Parallel(64, 64):
                S[i, j] = A[i, j]
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[63 - i, 63 - j]


@T.prim_func
def user_sync_inside_ws(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((64, 64), "float32")
        with T.ws(1):
            for i, j in T.Parallel(64, 64):
                S[i, j] = A[i, j]
            T.sync_threads()  # warpgroup 0 never gets here
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[63 - i, 63 - j]


def test_the_users_sync_threads_inside_ws_waits_for_that_warpgroup_only() -> None:
    source = _source(user_sync_inside_ws, "sm_80")
    assert _named_barriers(source) == [(2, 128)]
    assert "__syncthreads" not in source


def test_range_barriers_avoid_the_users_named_barrier_ids() -> None:
    assert sorted(_named_barriers(_source(user_named_barrier_too, "sm_80"))) == [(2, 256), (3, 128)]


@pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
def test_nvcc_compiles_the_named_barriers_for_sm_90a() -> None:
    kernel = tilelang.compile(two_warpgroup_gemm, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    assert kernel.artifact.payload.cubin[:4] == b"\x7fELF"
    # the header's bar.sync takes its operands in registers; ptxas folds them into the SASS
    sass = kernel.get_kernel_source("sass")
    named = set(re.findall(r"BAR\.SYNC(?:\.DEFER_BLOCKING)? (0x[0-9a-f]+), (0x[0-9a-f]+)", sass))
    assert named == {("0x2", "0x80"), ("0x3", "0x80")}  # ids 2 and 3, 128 threads each


@T.prim_func
def static_scope_wgmma(
    A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")
):
    """TileLang's warp-specialize examples ask for ``scope="shared"`` (a static array)."""
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((64, 32), "float16", "shared")
        B_s = T.alloc_shared((32, 64), "float16", "shared")
        acc = T.alloc_fragment((64, 64), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.clear(acc)
        T.gemm(A_s, B_s, acc)
        T.copy(acc, C)


@pytest.mark.emu
@needs_host_cxx
def test_static_scope_shared_tiles_are_wgmma_operands_in_the_aligned_arena() -> None:
    # before: a static `__shared__ alignas(64)` array, which a swizzled wgmma descriptor cannot
    # address (its swizzle repeats every 512 or 1024 bytes); the emulator refused it ("wgmma
    # descriptor: the operand is not in the block's dynamic shared memory")
    kernel = tilelang.compile(static_scope_wgmma, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    assert "wgmma" in kernel.get_kernel_source()
    rng = np.random.default_rng(90)
    a = rng.standard_normal((64, 32)).astype("float16")
    b = rng.standard_normal((32, 64)).astype("float16")
    np.testing.assert_allclose(kernel(a, b), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=2e-2)
