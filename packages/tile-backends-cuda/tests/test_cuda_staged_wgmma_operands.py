"""wgmma on part of a shared tile: one stage of a multi-buffered tile, a block of its columns.

Hand-written warp specialization double-buffers its tiles by hand and multiplies one stage
(TileLang's ``example_warp_specialize_gemm_barrierpipe_stage2``: ``T.gemm(A_shared[ko % 2, :, :],
B_shared[ko % 2, :, :], C_local)``), and the MLA decoders multiply column halves of a tile
(``Q_shared[:, : dim // 2]``). On sm_90a the descriptors address such a part where the whole
tile's descriptors would for those rows and columns; an MN-major operand's column blocks lie
all stages' rows apart. Checked on the sm_90a emulator against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]

SM90A = {"kind": "cuda", "arch": "sm_90a"}
M, N, K, BK = 64, 128, 128, 32
TILE = (64, 128)


@T.prim_func
def double_buffered(
    A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")
):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((2, M, BK), "float16")
        B_s = T.alloc_shared((2, BK, N), "float16")  # N = two 64-column swizzle blocks, MN-major
        acc = T.alloc_fragment((M, N), "float32")
        T.clear(acc)
        for ko in T.serial(K // BK):
            T.copy(A[0, ko * BK], A_s[ko % 2, :, :])
            T.copy(B[ko * BK, 0], B_s[ko % 2, :, :])
            T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, :], acc)
        T.copy(acc, C[0, 0])


def column_blocks(first: tuple[int, int], second: tuple[int, int]) -> object:
    """S = Q[:, first] @ Kt[:, first]^T + Q[:, second] @ Kt[:, second]^T, column ranges of tiles."""

    @T.prim_func
    def main(Q: T.Tensor(TILE, "float16"), Kt: T.Tensor(TILE, "float16"), S: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            Q_s, K_s = T.alloc_shared(TILE, "float16"), T.alloc_shared(TILE, "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            T.copy(Q[0, 0], Q_s)
            T.copy(Kt[0, 0], K_s)
            T.gemm(Q_s[:, first[0] : first[1]], K_s[:, first[0] : first[1]], acc, transpose_B=True)
            T.gemm(Q_s[:, second[0] : second[1]], K_s[:, second[0] : second[1]], acc, transpose_B=True)
            T.copy(acc, S[0, 0])

    return main


def test_one_stage_of_double_buffered_operands_matches_numpy() -> None:
    # before: "T.gemm on sm_90a reads A_s from registers"; then, with B's column blocks taken
    # one stage apart instead of both stages apart, the right half of C read unwritten memory
    rng = np.random.default_rng(2)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    kernel = tilelang.compile(double_buffered, out_idx=[-1], target=SM90A)
    assert "tile_wgmma_m64n128k16_ss" in kernel.get_kernel_source()
    want = a.astype("float32") @ b.astype("float32")
    np.testing.assert_allclose(kernel(a, b), want, rtol=1e-3, atol=2e-2)


def test_column_halves_of_shared_tiles_match_numpy() -> None:
    rng = np.random.default_rng(4)
    q = rng.standard_normal((64, 128)).astype("float16")
    k = rng.standard_normal((64, 128)).astype("float16")
    kernel = tilelang.compile(column_blocks((0, 64), (64, 128)), out_idx=[-1], target=SM90A)
    assert "tile_wgmma_m64n64k16_ss" in kernel.get_kernel_source()
    want = q.astype("float32") @ k.astype("float32").T
    np.testing.assert_allclose(kernel(q, k), want, rtol=1e-3, atol=2e-2)


def test_columns_starting_inside_a_swizzle_span_are_refused() -> None:
    with pytest.raises(UnsupportedOnTargetError, match="starts inside a swizzle span"):
        tilelang.compile(column_blocks((16, 80), (80, 128)), out_idx=[-1], target=SM90A)
