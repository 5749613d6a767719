"""wgmma operands that are column blocks of a 128B-swizzled shared tile, chosen by a loop
variable (TileLang's examples/warp_specialize/example_warp_specialize_flashmla.py:
``T.wgmma_gemm(Q_shared_l[:, j * 64 : (j + 1) * 64], ...)`` inside ``T.unroll``).

A K-major float16 tile with a 128-byte swizzle stores each 64-element column block as its own
run of 8-row atoms (PTX "Matrix Descriptor Format"; the canonical K-major 128B layout), so
block ``j`` starts on a 1024-byte period and the descriptor of the whole tile's rows, moved to
that block, addresses it with the same SBO (1024 bytes) and a matrix base offset of 0. tile
refused any column start it could not read as a constant; a start the loop makes symbolic is
now taken when it is provably a multiple of the span. A start inside a span (``j * 32``) stays
a typed refusal. Results are compared with numpy on the CPU emulator (TILE_DEVICE=emu).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]

M, N, K = 64, 64, 256
SM90A = {"kind": "cuda", "arch": "sm_90a"}
F32 = "float32"


def _scores(block: int) -> object:
    """S = Q @ K^T, accumulated over column blocks ``[j * block, (j + 1) * block)`` of Q and K."""

    @T.prim_func
    def scores(Q: T.Tensor((M, K), "float16"), Kt: T.Tensor((N, K), "float16"), S: T.Tensor((M, N), F32)):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((M, N), "float32")
            Q_s, K_s = T.alloc_shared((M, K), "float16"), T.alloc_shared((N, K), "float16")
            T.copy(Q, Q_s)
            T.copy(Kt, K_s)
            for j in T.unroll(K // block):
                T.wgmma_gemm(
                    Q_s[:, j * block : (j + 1) * block],
                    K_s[:, j * block : (j + 1) * block],
                    acc,
                    transpose_B=True,
                    clear_accum=(j == 0),
                )
            T.copy(acc, S)

    return scores


def test_column_blocks_of_a_swizzled_tile_feed_wgmma(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_scores(64), out_idx=[-1], target=SM90A)
    assert "tile_wgmma_m64n64k16_ss_f16_f32" in kernel.get_kernel_source()
    rng = np.random.default_rng(11)
    q = rng.standard_normal((M, K)).astype("float16")
    k = rng.standard_normal((N, K)).astype("float16")
    expected = q.astype(np.float64) @ k.astype(np.float64).T
    np.testing.assert_allclose(kernel(q, k), expected, rtol=1e-3, atol=1e-3)


ROW_STATS = ("max", "min", "sum", "absmax")


@T.prim_func
def _row_stats(Q: T.Tensor((M, K), "float16"), Kt: T.Tensor((N, K), "float16"), S: T.Tensor((M, N), F32)):
    """S = Q @ K^T minus four statistics of its row, each kept in its own shared float row
    (256 bytes) beside the two wgmma operand tiles (32 KiB each, 1024-byte swizzle periods)."""
    with T.Kernel(1, threads=128):
        Q_s = T.alloc_shared((M, K), "float16")
        K_s = T.alloc_shared((N, K), "float16")
        acc = T.alloc_fragment((M, N), "float32")
        stat = T.alloc_fragment((M,), "float32")
        mx = T.alloc_shared((M,), "float32")
        mn = T.alloc_shared((M,), "float32")
        sm = T.alloc_shared((M,), "float32")
        ab = T.alloc_shared((M,), "float32")
        T.copy(Q, Q_s)
        T.copy(Kt, K_s)
        for j in T.unroll(K // 64):
            T.wgmma_gemm(Q_s[:, j * 64 : (j + 1) * 64], K_s[:, j * 64 : (j + 1) * 64], acc, transpose_B=True,
                         clear_accum=(j == 0))  # fmt: skip
        T.reduce_max(acc, stat, dim=1)
        T.copy(stat, mx)
        T.reduce_min(acc, stat, dim=1)
        T.copy(stat, mn)
        T.reduce_sum(acc, stat, dim=1)
        T.copy(stat, sm)
        T.reduce_absmax(acc, stat, dim=1)
        T.copy(stat, ab)
        for i, n in T.Parallel(M, N):
            S[i, n] = acc[i, n] - mx[i] - mn[i] - sm[i] - ab[i]


def test_small_shared_rows_are_not_padded_to_a_swizzle_period(monkeypatch):
    """The swizzled tiles are aligned to their period (TVM honours a buffer's data_alignment when
    it merges shared memory); the four float rows take 4 x 256 bytes, not 4 periods of 1024
    (the warp-specialized FlashMLA decoder's four rows cost 3 KiB more that way, past sm_90a's
    227 KiB)."""
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_row_stats, out_idx=[-1], target=SM90A)
    assert int(kernel.artifact.payload.recipe.dynamic_shared) == 2 * (M * K * 2) + len(ROW_STATS) * M * 4
    rng = np.random.default_rng(12)
    q = rng.standard_normal((M, K)).astype("float16")
    k = rng.standard_normal((N, K)).astype("float16")
    scores = q.astype(np.float64) @ k.astype(np.float64).T
    stats = scores.max(1) + scores.min(1) + scores.sum(1) + np.abs(scores).max(1)
    np.testing.assert_allclose(kernel(q, k), scores - stats[:, None], rtol=1e-3, atol=2e-3)


def test_a_column_block_starting_inside_a_swizzle_span_is_refused(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    with pytest.raises(UnsupportedOnTargetError, match="starts inside a swizzle span") as info:
        tilelang.compile(_scores(32), out_idx=[-1], target=SM90A)
    assert "multiple of its swizzle span" in str(info.value)


def test_column_block_addresses_match_the_canonical_k_major_128b_layout():
    """Where the layout tile stores a (64, 256) float16 operand in, element (r, 64 j + c) sits
    where a descriptor starting at column block j reads (r, c): the PTX canonical K-major 128B
    layout, written out by hand (row r at 128 r bytes, 16-byte chunk c // 8 XOR-ed with
    r mod 8, 8-row atoms 1024 bytes apart), and each block starts on a 1024-byte period."""
    import tvm  # type: ignore[import-untyped]

    from tile.layout import make_swizzled_layout

    layout = make_swizzled_layout([M, K], "float16")
    rows, cols = (int(d) for d in layout.get_output_shape())
    analyzer = tvm.sym.Analyzer()

    def stored_byte(r: int, c: int) -> int:
        row, col = (int(analyzer.simplify(e)) for e in layout.map_forward_index([r, c]))
        assert 0 <= row < rows and 0 <= col < cols
        return (row * cols + col) * 2

    for j in range(K // 64):
        start = stored_byte(0, 64 * j)
        assert start % 1024 == 0
        for r in range(M):
            for c in range(0, 64, 4):
                canonical = start + 128 * r + ((((2 * c) // 16) ^ (r % 8)) * 16) + (2 * c) % 16
                assert stored_byte(r, 64 * j + c) == canonical, (j, r, c)
