"""The GPU lowering paths, one small fixed kernel each: what the mutation check's GPU faults hit.

Every kernel is an ordinary tile program (it runs on every backend), chosen so that on a GPU
target it takes one specific path: a ``T.Pipelined`` GEMM whose ring spans several phases
(sm_80: cp.async groups, ldmatrix, mma.sync; sm_90a: TMA into an mbarrier ring filled by a
producer warpgroup, wgmma on swizzled descriptors; gfx90a: MFMA, and for 4-byte operands the
LDS DMA ring waited for with ``vmcnt``), the transposed operands (ldmatrix ``.trans``, MN-major
wgmma descriptors, the CPU micro-kernels' transpose flags), and a 16-bit fragment stored
through shared memory (stmatrix on sm_90a). No hypothesis: one build and a few launches per
test, so ``conformance/mutation/run_mutations.py`` can run a fault's catching test in seconds
under the emulator. Sizes are whole blocks with K spanning 8 ring steps (every stage of a
2- or 3-deep ring is refilled, and mbarrier phases wrap) plus a ragged variant.
"""

from __future__ import annotations

import numpy as np
import pytest

from tile.conformance import reference as ref
from tile.testsupport.kernels import pipelined_gemm

BM, BN, BK = 64, 64, 32


def ring_gemm_kernel(M: int, N: int, K: int, dtype: str, trans_a: bool, trans_b: bool, stages: int,
                     out_dtype: str = "float32"):
    """C = op(A) op(B) with A stored (K, M) when ``trans_a`` and B stored (N, K) when ``trans_b``.

    A 16-bit ``out_dtype`` goes fragment -> shared tile -> global (stmatrix on sm_90a).
    """
    return pipelined_gemm(M, N, K, BM, BN, BK, dtype, trans_a=trans_a, trans_b=trans_b, num_stages=stages,
                          out_dtype=out_dtype)  # the paper GEMM of tile.testsupport.kernels


def _operands(rng, M, N, K, dtype, trans_a, trans_b):
    a = ref.random_array(rng, (K, M) if trans_a else (M, K), dtype)
    b = ref.random_array(rng, (N, K) if trans_b else (K, N), dtype)
    return a, b, (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)


def _check_gemm(tile_backend, M, N, K, dtype, trans_a, trans_b, stages, seed):
    kernel = tile_backend.build(ring_gemm_kernel, M, N, K, dtype, trans_a, trans_b, stages, out_idx=(-1,))
    a, b, want = _operands(np.random.default_rng(seed), M, N, K, dtype, trans_a, trans_b)
    ref.assert_close(kernel(a, b), want, dtype, accumulate=K, magnitude=4.0,
                     product_error=ref.gemm_product_error(dtype, tile_backend.capabilities))


@pytest.mark.requires(dtypes={"float16"})
def test_ring_gemm_float16(tile_backend) -> None:
    _check_gemm(tile_backend, 128, 128, 8 * BK, "float16", False, False, 2, seed=1)


@pytest.mark.requires(dtypes={"float16"})
@pytest.mark.parametrize("trans_a, trans_b", [(False, True), (True, False)], ids=["nt", "tn"])
def test_ring_gemm_float16_transposed(tile_backend, trans_a, trans_b) -> None:
    _check_gemm(tile_backend, 128, 64, 8 * BK, "float16", trans_a, trans_b, 2, seed=2)


def test_ring_gemm_float32_three_stages(tile_backend) -> None:
    # on sm_90a: the warpgroup accumulator, on mma.sync's tf32 instruction in the warpgroup's
    # warp order (B is MN-major here; tf32 wgmma takes K-major operands only). It was refused
    # until session 25 (a strict xfail here then).
    _check_gemm(tile_backend, 64, 128, 8 * BK, "float32", False, False, 3, seed=3)


@pytest.mark.requires(dtypes={"bfloat16"})
def test_ring_gemm_bfloat16_transposed_b(tile_backend) -> None:
    _check_gemm(tile_backend, 64, 64, 4 * BK, "bfloat16", False, True, 2, seed=6)


@pytest.mark.requires(dtypes={"float16"})
def test_serial_gemm_float16(tile_backend) -> None:
    # num_stages=1: plain loads into shared memory, then the gemm (wgmma on sm_90a reads what
    # generic stores wrote: the proxy fence)
    _check_gemm(tile_backend, 64, 128, 4 * BK, "float16", False, False, 1, seed=7)


@pytest.mark.requires(dtypes={"float16"})
def test_ring_gemm_float16_ragged(tile_backend) -> None:
    # M, N, K not multiples of the block: the tail guards, zero fill and a partial last step
    _check_gemm(tile_backend, 100, 72, 7 * BK + 5, "float16", False, False, 2, seed=4)


@pytest.mark.requires(dtypes={"float16"})
def test_fragment_stored_through_shared_float16(tile_backend) -> None:
    M, N, K = 128, 128, 4 * BK
    kernel = tile_backend.build(ring_gemm_kernel, M, N, K, "float16", False, False, 2, "float16",
                                out_idx=(-1,))
    a, b, want = _operands(np.random.default_rng(5), M, N, K, "float16", False, False)
    ref.assert_close(kernel(a, b), want, "float16", accumulate=K, magnitude=4.0,
                     product_error=ref.gemm_product_error("float16", tile_backend.capabilities))
