"""FlashMLA decode (the TileLang paper's appendix B.3), unchanged except for the two
import lines and a mask for a cache length that is not a multiple of ``block_N``.

Every query head attends over one shared latent key/value cache ``KV`` plus a
rotary part ``K_pe``; the output is a softmax-weighted sum of ``KV`` rows.

Run: python examples/flash_mla_decode.py
"""

import math

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def flashmla_decode(batch, heads, kv_head_num, seqlen_kv, dim, pe_dim, block_N, block_H):
    scale = float(1.0 / math.sqrt(dim + pe_dim)) * 1.44269504  # log2(e)
    dtype = "float16"
    accum_dtype = "float"
    kv_group_num = heads // kv_head_num
    VALID_BLOCK_H = min(block_H, kv_group_num)
    mask_tail = seqlen_kv % block_N != 0

    @T.prim_func
    def flash_attn(
        Q: T.Tensor([batch, heads, dim], dtype),
        Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
        KV: T.Tensor([batch, seqlen_kv, kv_head_num, dim], dtype),
        K_pe: T.Tensor([batch, seqlen_kv, kv_head_num, pe_dim], dtype),
        Output: T.Tensor([batch, heads, dim], dtype),
    ):
        with T.Kernel(batch, heads // min(block_H, kv_group_num), threads=256) as (bx, by):
            T.use_swizzle(10)
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            O_shared = T.alloc_shared([block_H, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_H], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_H], accum_dtype)
            scores_scale = T.alloc_fragment([block_H], accum_dtype)
            scores_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)

            cur_kv_head = by // (kv_group_num // block_H)

            T.copy(Q[bx, by * VALID_BLOCK_H : (by + 1) * VALID_BLOCK_H, :], Q_shared)
            T.copy(Q_pe[bx, by * VALID_BLOCK_H : (by + 1) * VALID_BLOCK_H, :], Q_pe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = T.ceildiv(seqlen_kv, block_N)
            for k in T.Pipelined(loop_range, num_stages=2):
                T.copy(KV[bx, k * block_N : (k + 1) * block_N, cur_kv_head, :], KV_shared)
                T.copy(K_pe[bx, k * block_N : (k + 1) * block_N, cur_kv_head, :], K_pe_shared)
                if mask_tail:
                    for i, j in T.Parallel(block_H, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen_kv, 0, -T.infinity(accum_dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                T.copy(acc_s, S_shared)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bx, by * VALID_BLOCK_H : (by + 1) * VALID_BLOCK_H, :])

    return flash_attn


def reference(q, q_pe, kv, k_pe):
    group = q.shape[1] // kv.shape[2]
    kv = np.repeat(kv.astype("float64"), group, axis=2)  # (batch, seqlen, heads, dim)
    k_pe = np.repeat(k_pe.astype("float64"), group, axis=2)
    scores = np.einsum("bhd,bshd->bhs", q.astype("float64"), kv)
    scores += np.einsum("bhp,bshp->bhs", q_pe.astype("float64"), k_pe)
    scores /= math.sqrt(q.shape[-1] + q_pe.shape[-1])
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("bhs,bshd->bhd", p / p.sum(axis=-1, keepdims=True), kv)


if __name__ == "__main__":
    batch, heads, kv_heads, dim, pe_dim = 2, 64, 1, 512, 64
    rng = np.random.default_rng(0)
    for seqlen_kv in (512, 300):  # a multiple of block_N, and a masked tail
        kernel = flashmla_decode(batch, heads, kv_heads, seqlen_kv, dim, pe_dim, block_N=64, block_H=64)
        q = rng.standard_normal((batch, heads, dim)).astype("float16")
        q_pe = rng.standard_normal((batch, heads, pe_dim)).astype("float16")
        kv = rng.standard_normal((batch, seqlen_kv, kv_heads, dim)).astype("float16")
        k_pe = rng.standard_normal((batch, seqlen_kv, kv_heads, pe_dim)).astype("float16")
        out = kernel(q, q_pe, kv, k_pe)
        np.testing.assert_allclose(out.astype("float64"), reference(q, q_pe, kv, k_pe), rtol=1e-2, atol=1e-2)
    print("flash_mla_decode: OK")
