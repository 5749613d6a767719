"""Pipelined copies into views of a swizzled shared tile, sm_90a (TMA) and sm_80, on the emulator.

A GEMM's A operand tile ``S`` (128 x 32 fp16, swizzled for the tensor cores) is filled
through ``T.reshape(S, [64, 64])`` from a tensor laid out in 64-wide slabs, or through
two row slices ``S[0:64, :]`` / ``S[64:128, :]``. Before, the pipeline planner took the
view for an unrelated buffer: it versioned the view, left ``S`` unversioned and let the
gemm run ahead of the copy, and the ring rewrite left the view pointing at nothing
("Invalid use of undefined variable V"). The view's row length is not the tile's, so no
TMA box writes it in the tile's swizzle: the copy stays a plain copy through the
swizzle while ``B`` keeps its TMA loads. The kernels run on the emulator against numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src.emulation import EmulatedCudaKernel
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]

M = N = 128
K = 128
BM, BN, BK = 128, 128, 32
SLABS = K // BK


def gemm_through_view(view_inside_loop: bool) -> Any:
    """``C = A @ B`` with A's tile ``S`` filled through a (64, 64) reshape of it; ``A3[t]`` is
    A's columns ``t * 32 ...`` as 64 rows of 64 (each row two rows of A)."""

    @T.prim_func
    def main(
        A3: T.Tensor((SLABS, M // 2, 2 * BK), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(N // BN, M // BM, threads=128) as (bx, by):
            S = T.alloc_shared((BM, BK), "float16")
            Bs = T.alloc_shared((BK, BN), "float16")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.clear(acc)
            if not view_inside_loop:
                V = T.reshape(S, [BM // 2, 2 * BK])
            for k in T.Pipelined(SLABS, num_stages=2):
                if view_inside_loop:
                    V = T.reshape(S, [BM // 2, 2 * BK])
                T.copy(A3[k, by * BM // 2, 0], V)
                T.copy(B[k * BK, bx * BN], Bs)
                T.gemm(S, Bs, acc)
            T.copy(acc, C[by * BM, bx * BN])

    return main


def gemm_through_row_slices() -> Any:
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // BN, M // BM, threads=128) as (bx, by):
            S = T.alloc_shared((BM, BK), "float16")
            Bs = T.alloc_shared((BK, BN), "float16")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.clear(acc)
            for k in T.Pipelined(SLABS, num_stages=2):
                T.copy(A[by * BM, k * BK], S[0 : BM // 2, :])
                T.copy(A[by * BM + BM // 2, k * BK], S[BM // 2 : BM, :])
                T.copy(B[k * BK, bx * BN], Bs)
                T.gemm(S, Bs, acc)
            T.copy(acc, C[by * BM, bx * BN])

    return main


def _run(func: Any, arch: str, slabs: bool) -> tuple[str, np.ndarray, np.ndarray]:
    target = {"kind": "cuda", "arch": arch, "warp_specialize": "1"}
    binary = tilelang.compile(func, target=target).artifact.payload
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    slab = [a[:, t * BK : (t + 1) * BK].reshape(M // 2, 2 * BK) for t in range(SLABS)]
    first = np.stack(slab) if slabs else a
    EmulatedCudaKernel(binary.source, binary.recipe, binary.params)(first, b, c)
    return binary.source, c, a.astype(np.float32) @ b.astype(np.float32)


@pytest.mark.parametrize("view_inside_loop", [False, True], ids=["view-before-loop", "view-in-loop"])
def test_tma_pipeline_with_a_reshaped_view_of_the_swizzled_tile(view_inside_loop: bool) -> None:
    source, got, want = _run(gemm_through_view(view_inside_loop), "sm_90a", slabs=True)
    assert "tile_tmap_B" in source and "tile_tmap_A3" not in source  # B by TMA; the view by plain copies
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_cp_async_pipeline_with_a_reshaped_view_of_the_swizzled_tile() -> None:
    _, got, want = _run(gemm_through_view(False), "sm_80", slabs=True)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_tma_pipeline_with_row_slices_of_the_swizzled_tile() -> None:
    _, got, want = _run(gemm_through_row_slices(), "sm_90a", slabs=False)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
