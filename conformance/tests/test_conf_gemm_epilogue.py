"""T.gemm with epilogues over tile configs: transposes, operand scopes, policies, stages.

M is a ``T.dynamic`` dim, so one compiled kernel serves every drawn M (primes and
non-multiples of the block included); N and K are drawn from edge sizes per config.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts

POLICIES = {"Square": T.GemmWarpPolicy.Square, "FullRow": T.GemmWarpPolicy.FullRow,
            "FullCol": T.GemmWarpPolicy.FullCol}


def gemm_epilogue_kernel(N: int, K: int, cfg: ts.GemmConfig, dtype: str, epilogue: str):
    M = T.dynamic("M")
    bm, bn, bk = cfg.block_M, cfg.block_N, cfg.block_K
    a_shape = (K, M) if cfg.trans_A else (M, K)
    b_shape = (N, K) if cfg.trans_B else (K, N)
    a_tile = (bk, bm) if cfg.trans_A else (bm, bk)
    b_tile = (bn, bk) if cfg.trans_B else (bk, bn)
    alloc_a = T.alloc_fragment if cfg.scope[0] == "r" else T.alloc_shared
    alloc_b = T.alloc_fragment if cfg.scope[1] == "r" else T.alloc_shared
    policy = POLICIES[cfg.policy]

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), Bias: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=cfg.threads) as (bx, by):
            A_t = alloc_a(a_tile, dtype)
            B_t = alloc_b(b_tile, dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=cfg.num_stages):
                if cfg.trans_A:
                    T.copy(A[k * bk, by * bm], A_t)
                else:
                    T.copy(A[by * bm, k * bk], A_t)
                if cfg.trans_B:
                    T.copy(B[bx * bn, k * bk], B_t)
                else:
                    T.copy(B[k * bk, bx * bn], B_t)
                T.gemm(A_t, B_t, C_f, transpose_A=cfg.trans_A, transpose_B=cfg.trans_B, policy=policy)
            for i, j in T.Parallel(bm, bn):
                if epilogue == "relu":
                    C_f[i, j] = T.max(C_f[i, j], 0.0)
                elif epilogue == "bias":
                    C_f[i, j] = C_f[i, j] + Bias[T.min(bx * bn + j, N - 1)]
                elif epilogue == "scale":
                    C_f[i, j] = C_f[i, j] * 0.5 - 1.0
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def reference(a, b, bias, cfg, epilogue):
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    c = (a64.T if cfg.trans_A else a64) @ (b64.T if cfg.trans_B else b64)
    if epilogue == "relu":
        return np.maximum(c, 0)
    if epilogue == "bias":
        return c + bias.astype(np.float64)[None, :]
    if epilogue == "scale":
        return c * 0.5 - 1.0
    return c


@given(cfg=ts.gemm_configs(), nk=st.sampled_from([(16, 16), (37, 24), (64, 40), (13, 61)]),
       m=ts.dims(150), epilogue=st.sampled_from(["none", "relu", "bias", "scale"]), data=st.data())
def test_gemm_with_epilogue(tile_backend, cfg, nk, m, epilogue, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16", "bfloat16")),
                      label="dtype")
    N, K = nk
    kernel = tile_backend.build(gemm_epilogue_kernel, N, K, cfg, dtype, epilogue, out_idx=(-1,))
    rng = np.random.default_rng(m * 7 + N)
    a = ref.random_array(rng, (K, m) if cfg.trans_A else (m, K), dtype)
    b = ref.random_array(rng, (N, K) if cfg.trans_B else (K, N), dtype)
    bias = ref.random_array(rng, (N,), "float32")
    out = kernel(a, b, bias)
    expected = reference(a, b, bias, cfg, epilogue)
    ref.assert_close(out, expected, dtype, accumulate=K, magnitude=4.0,
                     product_error=ref.gemm_product_error(dtype, tile_backend.capabilities))
