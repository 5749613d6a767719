"""FlashAttention's CUDA lowering on sm_80, run under the CPU emulator (TILE_DEVICE=emu).

The generated source (mma.sync + ldmatrix for Q K^T, shuffle + shared-memory row
reductions, the register-A P V gemm, the K/V cp.async ring) runs on the emulator and
is compared with numpy. Regression: the copy of the score accumulator into the P V
gemm's A operand read other threads' registers whenever the two fragments split the
warps differently (Square 2 x 2: 77-89% of the outputs wrong on an H100 and here).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src.backend import capabilities
from tile.ir.gpu import held_in_place
from tile.ir.ops.layout_rules import gemm_fragments
from tile.ir.target import Target
from tile.ops.attention import flash_attention_kernel
from tile.testsupport.markers import needs_host_cxx
from tile.testsupport.references import attention as sdpa

pytestmark = [needs_host_cxx, pytest.mark.emu]
SM80 = {"kind": "cuda", "arch": "sm_80"}


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_matches_numpy(causal):
    # two K/V tiles: the running max, the rescale of acc_o and the ring all take part
    b, h, s, d = 1, 2, 128, 64
    func = flash_attention_kernel(b, h, s, d, causal, "float16", block_M=64, block_N=64, threads=128)
    kernel = tilelang.compile(func, out_idx=[-1], target=SM80)
    rng = np.random.default_rng(7 + causal)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    got = kernel(q, k, v).astype(np.float32)
    np.testing.assert_allclose(got, sdpa(q, k, v, causal), rtol=5e-3, atol=5e-3)


def two_gemm_kernel(m, n, d, threads):
    """``O = fp16(Q K^T) V`` with the default (Square) warp split, as the paper writes gemms."""

    @T.prim_func
    def two_gemm(
        Q: T.Tensor((m, d), "float16"),
        K: T.Tensor((n, d), "float16"),
        V: T.Tensor((n, d), "float16"),
        Out: T.Tensor((m, d), "float32"),
    ):
        with T.Kernel(1, threads=threads) as _bx:
            Q_shared = T.alloc_shared((m, d), "float16")
            K_shared = T.alloc_shared((n, d), "float16")
            V_shared = T.alloc_shared((n, d), "float16")
            acc_s = T.alloc_fragment((m, n), "float32")
            acc_s_cast = T.alloc_fragment((m, n), "float16")
            acc_o = T.alloc_fragment((m, d), "float32")
            T.copy(Q, Q_shared)
            T.copy(K, K_shared)
            T.copy(V, V_shared)
            T.clear(acc_s)
            T.clear(acc_o)
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
            T.copy(acc_s, acc_s_cast)
            T.gemm(acc_s_cast, V_shared, acc_o)
            T.copy(acc_o, Out)

    return two_gemm


def test_square_split_score_tile_reaches_the_register_a_gemm():
    """Square 2 x 2 warps: the A operand's rows span the other warp column's scores."""
    m, n, d = 64, 64, 64
    kernel = tilelang.compile(two_gemm_kernel(m, n, d, 128), out_idx=[-1], target=SM80)
    assert "acc_s_cast_xchg" in kernel.get_kernel_source("cuda")
    rng = np.random.default_rng(11)
    q = (rng.standard_normal((m, d)) * 0.25).astype(np.float16)
    k = (rng.standard_normal((n, d)) * 0.25).astype(np.float16)
    v = rng.standard_normal((n, d)).astype(np.float16)
    p = (q.astype(np.float32) @ k.astype(np.float32).T).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(kernel(q, k, v), p @ v.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(
    ("policy", "in_place"),
    [(0, False), (1, True)],  # Square splits 64 x 64 over 2 x 2 warps; FullRow over 4 x 1
)
def test_accumulator_as_a_operand_is_in_place_only_when_warps_own_whole_rows(policy, in_place):
    caps = capabilities(Target("cuda", arch="sm_80"))
    # the score gemm (64 x 64, K = 64) and the P V gemm (A: its 64 x 64 probabilities)
    c_frag, _a, _b = gemm_fragments(64, 64, 128, caps, "float16", 64, policy)
    _c, a_frag, _b = gemm_fragments(64, 64, 128, caps, "float16", 64, policy)
    assert a_frag is not None
    assert held_in_place(c_frag, a_frag) is in_place
    # independently: thread t's A element (i, j) is where t's accumulator holds it
    owners_c = {coord: {t} for coord, _r, t, _l in c_frag.enumerate_threads()}
    every = all(t in owners_c[coord] for coord, _r, t, _l in a_frag.enumerate_threads())
    assert every is in_place
