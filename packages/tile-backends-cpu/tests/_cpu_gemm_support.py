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


def k_loop_gemm(
    M, N, K, block_M, block_N, block_K, dtype="bfloat16", trans_b=False, num_stages=2, write_b=False,
    init=None,
):
    """The paper GEMM's K loop: per block, A and B tiles staged in shared memory and one T.gemm per
    K step into a float32 fragment. B is optionally stored (N, K); ``write_b`` also stores into B,
    so that B is not read-only. The fragment starts from ``T.clear``, or ``T.fill(C_f, init)``."""
    b_shape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K) if trans_b else (block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            if init is None:
                T.clear(C_f)
            else:
                T.fill(C_f, init)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                if trans_b:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=trans_b)
            T.copy(C_f, C[by * block_M, bx * block_N])
            if write_b:
                B[0, 0] = T.cast(0, dtype)

    return main


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
