"""Helpers shared by the CPU T.gemm tests: a one-block gemm kernel, a bf16 product check, and the
CPU gemm rule with one of its choices pinned."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import ml_dtypes
import numpy as np

import tile.lang.language as T
from tile.backends.cpu._src import gemm as cpu_gemm
from tile.ir.ops import Gemm, register_lowering
from tile.ir.ops.registry import _rules
from tile.testsupport.kernels import pipelined_gemm


def gemm_tile_kernel(M, N, K, trans_a, trans_b, scopes, dtype, clear_accum, accum="float32"):
    """One block: C_frag = C (loaded), then T.gemm on tiles copied into the given scopes
    (``scopes``: two letters, ``r`` for a fragment, else shared memory, for A and B)."""
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    alloc_a = T.alloc_fragment if scopes[0] == "r" else T.alloc_shared
    alloc_b = T.alloc_fragment if scopes[1] == "r" else T.alloc_shared

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841  (the TileLang form)
            A_t = alloc_a(a_shape, dtype)
            B_t = alloc_b(b_shape, dtype)
            C_f = T.alloc_fragment((M, N), accum)
            T.copy(A[0, 0], A_t)
            T.copy(B[0, 0], B_t)
            T.copy(C[0, 0], C_f)
            T.gemm(A_t, B_t, C_f, transpose_A=trans_a, transpose_B=trans_b, clear_accum=clear_accum)
            T.copy(C_f, C[0, 0])

    return main


def k_loop_gemm(M, N, K, block_M, block_N, block_K, dtype="bfloat16", trans_b=False, num_stages=2):
    """The paper GEMM's K loop (``tile.testsupport.kernels.pipelined_gemm``), bf16 by default."""
    return pipelined_gemm(M, N, K, block_M, block_N, block_K, dtype, trans_b=trans_b, num_stages=num_stages)


def run_bf16_product(kernel, M, N, K, trans_b, seed=0):
    """``kernel(A, B, C)`` on random bf16 A (M x K) and B (K x N, or N x K when ``trans_b``) into a
    zeroed float32 C, checked against numpy on the bf16 inputs in float64; returns C."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(ml_dtypes.bfloat16)
    out = np.zeros((M, N), np.float32)
    kernel(a, b, out)
    b32 = b.astype(np.float32)
    expected = a.astype(np.float64) @ (b32.T if trans_b else b32)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-5 * K)
    return out


@contextlib.contextmanager
def pinned_gemm_rule(monkeypatch, **choices) -> Iterator[None]:
    """The CPU gemm rule registered with ``choices`` pinned (the last registered rule wins), until
    the block ends. The kernel cache is off: its key covers the sources, not a rule registered here."""
    monkeypatch.setenv("TILE_CACHE", "0")
    rules = _rules[Gemm]
    before = len(rules)
    register_lowering(Gemm, target="cpu")(functools.partial(cpu_gemm.lower_gemm_cpu, **choices))
    try:
        yield
    finally:
        del rules[before:]
