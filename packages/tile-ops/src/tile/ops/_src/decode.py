"""Split-KV decoding (flash-decoding) for one or a few query tokens, as two tile programs.

With one query token per head there is one row per head to work on, too little to fill a
device; the split kernel instead gives each block one (key range, KV head, batch) triple and
stacks every query row that reads that KV head (``heads // kv_heads`` query heads times
``seq_q`` tokens) as the rows of one tile, so GQA heads share each K/V tile they load. Each
block runs FlashAttention's online softmax over its key range and stores an unnormalized-free
partial output and its log-sum-exp; the combine kernel weights the partial outputs of every
row by ``exp(lse_split - lse_max)`` and normalizes.

With ``causal`` the queries are the last ``seq_q`` positions of the sequence (aligned at the
bottom right, as for speculative decoding): token ``s`` sees keys ``j <= seq_kv - seq_q + s``.
A key range a row cannot see leaves that row's partial LSE at ``-inf`` (weight zero).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tile.lang.language as T

from . import flash
from .configs import DecodeConfig


def _bottom_right(r0: Any, seq_q: int, seq_kv: int, causal: bool) -> Callable[[Any], Any] | None:
    """Causal (aligned at the bottom right): the position of row ``i`` of the tile at row ``r0``,
    token ``(r0 + i) % seq_q`` of its head's queries."""
    return (lambda i: seq_kv - seq_q + (r0 + i) % seq_q) if causal else None


def flash_decode_split_kernel(
    dims: tuple[int, ...], sm_scale: float, causal: bool, dtype: str, accum_dtype: str, config: DecodeConfig
) -> Any:
    """``(Q, K, V) -> (O_partial, LSE_partial)`` for ``dims`` = (batch, heads, kv_heads, seq_q,
    seq_kv, dim), with Q viewed as (batch, kv_heads, rows, dim), rows = (heads // kv_heads) *
    seq_q; partials are (batch, kv_heads, rows, num_splits[, dim]).

    ``config.block_H`` rows per block (``configs.decode_config``: the rows rounded up to 16-64)
    on ``config.split_threads``, which should give each warp whole 16-row instruction tiles of
    it (the gemms split the rows over the warps)."""
    batch, heads, kv_heads, seq_q, seq_kv, dim = dims
    num_splits, block_N, block_H = config.num_splits, config.block_N, config.block_H
    threads = config.split_threads
    rows = heads // kv_heads * seq_q
    row_blocks = (rows + block_H - 1) // block_H
    tiles = (seq_kv + block_N - 1) // block_N
    tiles_per_split = (tiles + num_splits - 1) // num_splits
    if (num_splits - 1) * tiles_per_split >= tiles:
        raise ValueError(
            f"{num_splits} splits of {tiles_per_split} tiles leave a split of {tiles} tiles empty"
        )
    scale = sm_scale * flash.LOG2_E

    @T.prim_func
    def flash_decode_split(
        Q: T.Tensor((batch, kv_heads, rows, dim), dtype),  # type: ignore[valid-type]
        K: T.Tensor((batch, kv_heads, seq_kv, dim), dtype),  # type: ignore[valid-type]
        V: T.Tensor((batch, kv_heads, seq_kv, dim), dtype),  # type: ignore[valid-type]
        O_partial: T.Tensor((batch, kv_heads, rows, num_splits, dim), accum_dtype),  # type: ignore[valid-type]
        LSE_partial: T.Tensor((batch, kv_heads, rows, num_splits), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(num_splits, kv_heads * row_blocks, batch, threads=threads) as (bs, bh, bz):
            Q_shared = T.alloc_shared((block_H, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = (
                flash.online_softmax_buffers(block_H, block_N, dim, dtype, accum_dtype)
            )
            kv_head = bh // row_blocks
            r0 = (bh % row_blocks) * block_H
            first = bs * tiles_per_split

            T.copy(Q[bz, kv_head, r0 : r0 + block_H, :], Q_shared)
            flash.online_softmax_init(acc_o, logsum, scores_max, accum_dtype)
            for t in T.Pipelined(T.min(tiles_per_split, tiles - first), num_stages=1):
                k0 = (first + t) * block_N
                T.copy(K[bz, kv_head, k0 : k0 + block_N, :], K_shared)
                T.copy(V[bz, kv_head, k0 : k0 + block_N, :], V_shared)
                flash.mask_scores(
                    acc_s, block_H, block_N, k0, seq_kv, _bottom_right(r0, seq_q, seq_kv, causal), accum_dtype
                )
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                # a row may see no key of this split yet (causal): it keeps acc_o = logsum = 0
                flash.online_softmax_step(
                    acc_s, acc_s_cast, acc_o, V_shared, scores_max, scores_max_prev, scores_scale,
                    scores_sum, logsum, scale, block_H, block_N, dim, accum_dtype, empty_rows=True,
                )
            flash.online_softmax_finish(
                acc_o, logsum, scores_max, scale, block_H, dim, accum_dtype, lse=True, empty_rows=True
            )
            T.copy(acc_o, O_partial[bz, kv_head, r0 : r0 + block_H, bs, :])
            T.copy(logsum, LSE_partial[bz, kv_head, r0 : r0 + block_H, bs])

    return flash_decode_split


def flash_decode_combine_kernel(
    dims: tuple[int, ...], dtype: str, accum_dtype: str, config: DecodeConfig
) -> Any:
    """``(O_partial, LSE_partial) -> Output`` over rows = heads * seq_q (the split kernel's
    partials viewed as (batch, rows, num_splits[, dim])); ``config.block_R`` rows per block on
    ``config.threads``."""
    batch, heads, _, seq_q, _, dim = dims
    num_splits, block_R, threads = config.num_splits, config.block_R, config.threads
    rows = heads * seq_q

    @T.prim_func
    def flash_decode_combine(
        O_partial: T.Tensor((batch, rows, num_splits, dim), accum_dtype),  # type: ignore[valid-type]
        LSE_partial: T.Tensor((batch, rows, num_splits), accum_dtype),  # type: ignore[valid-type]
        Output: T.Tensor((batch, rows, dim), dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(rows, block_R), batch, threads=threads) as (bx, bz):
            weight = T.alloc_fragment((block_R, num_splits), accum_dtype)
            lse_max = T.alloc_fragment((block_R,), accum_dtype)
            total = T.alloc_fragment((block_R,), accum_dtype)
            part = T.alloc_fragment((block_R, dim), accum_dtype)
            acc = T.alloc_fragment((block_R, dim), accum_dtype)
            T.copy(LSE_partial[bz, bx * block_R : (bx + 1) * block_R, :], weight)
            T.reduce_max(weight, lse_max, dim=1)
            for i, s in T.Parallel(block_R, num_splits):
                weight[i, s] = T.exp2((weight[i, s] - lse_max[i]) * flash.LOG2_E)
            T.reduce_sum(weight, total, dim=1)
            # the (rows, splits) weights are read against (rows, dim) tiles, which a GPU lays
            # out over other threads: through shared memory every thread reads what it needs
            weight_shared = T.alloc_shared((block_R, num_splits), accum_dtype)
            T.copy(weight, weight_shared)
            T.clear(acc)
            for s in T.serial(num_splits):
                T.copy(O_partial[bz, bx * block_R : (bx + 1) * block_R, s, :], part)
                for i, j in T.Parallel(block_R, dim):
                    acc[i, j] += part[i, j] * weight_shared[i, s]
            for i, j in T.Parallel(block_R, dim):
                acc[i, j] /= total[i]
            T.copy(acc, Output[bz, bx * block_R : (bx + 1) * block_R, :])

    return flash_decode_combine
