"""FlashMLA decode (the TileLang paper's appendix B.3) written in tile.lang.

Multi-head latent attention for one decoding step: every query head attends over a
shared compressed key/value cache ``KV`` (which is both the keys' ``nope`` part and
the values) plus a rotary part ``K_pe``::

    scores = (Q @ KV^T + Q_pe @ K_pe^T) / sqrt(dim + pe_dim)
    out = softmax(scores) @ KV

One block handles ``block_H`` heads of one batch entry that share a KV head, walking
the cache in ``block_N`` tiles with an online softmax (as in FlashAttention). The
probability tile is cast into shared memory as the A operand of the ``P @ KV`` gemm.
Cache lengths that are not multiples of ``block_N`` are masked.

Example::

    >>> import numpy as np
    >>> from tile.ops.mla import flash_mla_decode
    >>> q = np.zeros((1, 16, 32), "float32"); q_pe = np.zeros((1, 16, 8), "float32")
    >>> kv = np.ones((1, 5, 1, 32), "float32"); k_pe = np.zeros((1, 5, 1, 8), "float32")
    >>> float(flash_mla_decode(q, q_pe, kv, k_pe, target="cpu")[0, 15, 31])
    1.0
"""

from __future__ import annotations

import math
from typing import Any

import tile.lang.language as T

from ._src import flash
from ._src.configs import MMA_ROWS
from ._src.errors import bad_argument
from ._src.runtime import compiled


def flash_mla_decode_kernel(
    batch: int,
    heads: int,
    kv_head_num: int,
    seqlen_kv: int,
    dim: int,
    pe_dim: int,
    block_N: int = 64,
    block_H: int = 64,
    dtype: str = "float16",
    accum_dtype: str = "float32",
    num_stages: int = 2,
    threads: int = 256,
) -> Any:
    """Q (batch, heads, dim), Q_pe (batch, heads, pe_dim), KV (batch, seqlen_kv, kv_heads, dim),
    K_pe (batch, seqlen_kv, kv_heads, pe_dim) -> Output (batch, heads, dim).

    A block takes ``min(block_H, heads // kv_heads)`` heads; fewer than one matrix
    instruction's rows (``MMA_ROWS``) are padded to that many rows (never stored), so the
    gemms keep instruction-shaped accumulators whose row statistics agree."""
    scale = flash.LOG2_E / math.sqrt(dim + pe_dim)
    kv_group_num = heads // kv_head_num
    VALID_BLOCK_H = min(block_H, kv_group_num)
    if heads % kv_head_num or kv_group_num % VALID_BLOCK_H:
        raise ValueError(
            f"{heads} heads do not split into {kv_head_num} KV groups of {VALID_BLOCK_H}-head blocks"
        )
    block_H = max(VALID_BLOCK_H, MMA_ROWS)

    @T.prim_func
    def flash_mla_decode(
        Q: T.Tensor([batch, heads, dim], dtype),  # type: ignore[valid-type]
        Q_pe: T.Tensor([batch, heads, pe_dim], dtype),  # type: ignore[valid-type]
        KV: T.Tensor([batch, seqlen_kv, kv_head_num, dim], dtype),  # type: ignore[valid-type]
        K_pe: T.Tensor([batch, seqlen_kv, kv_head_num, pe_dim], dtype),  # type: ignore[valid-type]
        Output: T.Tensor([batch, heads, dim], dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(batch, heads // VALID_BLOCK_H, threads=threads) as (bx, by):
            T.use_swizzle(10)
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            O_shared = T.alloc_shared([block_H, dim], dtype)
            # the probability tile goes through shared memory: the gemms split its columns
            acc_s, S_shared, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = (
                flash.online_softmax_buffers(block_H, block_N, dim, dtype, accum_dtype, cast_shared=True)
            )
            cur_kv_head = by // (kv_group_num // VALID_BLOCK_H)
            h0 = by * VALID_BLOCK_H

            # padded rows read the next heads' queries (or zeros past the last head)
            T.copy(Q[bx, h0 : h0 + block_H, :], Q_shared)
            T.copy(Q_pe[bx, h0 : h0 + block_H, :], Q_pe_shared)
            flash.online_softmax_init(acc_o, logsum, scores_max, accum_dtype)
            for k in T.Pipelined(T.ceildiv(seqlen_kv, block_N), num_stages=num_stages):
                T.copy(KV[bx, k * block_N : (k + 1) * block_N, cur_kv_head, :], KV_shared)
                T.copy(K_pe[bx, k * block_N : (k + 1) * block_N, cur_kv_head, :], K_pe_shared)
                flash.mask_scores(acc_s, block_H, block_N, k * block_N, seqlen_kv, None, accum_dtype)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                flash.online_softmax_step(
                    acc_s, S_shared, acc_o, KV_shared, scores_max, scores_max_prev, scores_scale,
                    scores_sum, logsum, scale, block_H, block_N, dim, accum_dtype, T.GemmWarpPolicy.FullCol,
                )
            flash.online_softmax_finish(acc_o, logsum, scores_max, scale, block_H, dim, accum_dtype)
            T.copy(acc_o, O_shared)
            T.copy(O_shared[0:VALID_BLOCK_H, :], Output[bx, h0 : h0 + VALID_BLOCK_H, :])

    return flash_mla_decode


def flash_mla_decode(
    q: Any, q_pe: Any, kv: Any, k_pe: Any, block_N: int = 64, block_H: int = 64, target: str = "auto"
) -> Any:
    """One MLA decoding step: q (B, H, D), q_pe (B, H, P), kv (B, S, KH, D), k_pe (B, S, KH, P)."""
    batch, heads, dim = (int(s) for s in q.shape)
    _, seqlen_kv, kv_heads, _ = (int(s) for s in kv.shape)
    pe_dim = int(q_pe.shape[-1])
    expected = [
        (batch, heads, pe_dim),
        (batch, seqlen_kv, kv_heads, dim),
        (batch, seqlen_kv, kv_heads, pe_dim),
    ]
    if [tuple(x.shape) for x in (q_pe, kv, k_pe)] != expected:
        name = next(n for n, x, e in zip(("q_pe", "kv", "k_pe"), (q_pe, kv, k_pe), expected, strict=True)
                    if tuple(x.shape) != e)
        raise bad_argument("flash_mla_decode", name, "does not match q",
                           f"q_pe, kv, k_pe have shapes {expected}")
    dtype = str(q.dtype).removeprefix("torch.")
    kernel = compiled(
        flash_mla_decode_kernel, (-1,), target, batch, heads, kv_heads, seqlen_kv, dim, pe_dim, block_N,
        block_H, dtype,
    )
    return kernel(q, q_pe, kv, k_pe)
