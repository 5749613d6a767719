"""FlashAttention forward (with its log-sum-exp) and backward, in SDPA's layout, as tile programs.

Layout: ``Q``/``dQ``/``O``/``dO`` are (batch, heads, seq_q, dim); ``K``/``V``/``dK``/``dV`` are
(batch, kv_heads, seq_kv, dim), with ``heads`` a multiple of ``kv_heads``: query head ``h``
reads key/value head ``h // (heads // kv_heads)`` (GQA; MQA is ``kv_heads == 1``). The causal
mask is SDPA's ``is_causal``: query ``i`` sees keys ``j <= i`` (aligned at the top left).

Forward: the online softmax of FlashAttention over key tiles. Besides ``O`` it stores the
natural-log ``LSE[b, h, i] = log sum_j exp(scale * q_i . k_j)`` of every query row, so the
backward can rebuild each probability tile as ``exp(scale * S - LSE)`` without a second
softmax pass (FlashAttention-2's recomputation).

Backward, in three kernels:

- ``preprocess``: ``Delta[i] = dO_i . O_i`` (the row sums of ``P * dP``).
- ``dkdv``: one block per key tile of one KV head; it walks every query tile of every query
  head that shares the KV head, rebuilding ``P^T`` and ``dP^T = V dO^T`` in key-major
  orientation, and accumulates ``dV += P^T dO`` and ``dK += dS^T Q`` (``dS = P (dP - Delta)``)
  in registers: the GQA sum over heads happens inside the block, with no atomics.
- ``dq``: one block per query tile of one head; it walks the key tiles (causally limited),
  rebuilding ``P`` and ``dP`` and accumulating ``dQ += dS K``.

Splitting dQ from dK/dV recomputes ``Q K^T`` once more than FlashAttention-2's atomic dQ
update, and in exchange is deterministic and needs no float atomics from the backend.
"""

from __future__ import annotations

from typing import Any

import tile.lang.language as T

LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453


@T.macro
def online_softmax_step(  # type: ignore[no-untyped-def]
    acc_s, acc_s_cast, acc_o, V_shared, scores_max, scores_max_prev, scores_scale, scores_sum, logsum,
    scale, block_M, block_N, dim, accum_dtype, policy=T.GemmWarpPolicy.FullRow,
):
    """One key tile of FlashAttention's forward, after ``acc_s = Q K^T`` (masked, base-2 scores
    times ``1 / scale``): raise the running row max, rescale ``acc_o`` and ``logsum`` by
    ``exp2((old - new) * scale)``, exponentiate the tile and add ``P V`` into ``acc_o``. Rows of
    ``block_M`` queries, ``block_N`` keys, ``dim`` values. With the default ``policy``
    (``GemmWarpPolicy.FullRow``) the accumulators' warps own whole rows, so the row statistics
    stay inside a warp and ``acc_s_cast`` is a fragment; a policy that splits columns needs
    ``acc_s_cast`` in shared memory."""
    T.copy(scores_max, scores_max_prev)
    T.fill(scores_max, -T.infinity(accum_dtype))
    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
    for i in T.Parallel(block_M):
        # a row this key tile masks entirely (causal, block_M > block_N) keeps its running
        # max: -inf here would make its rescale factor exp2(+inf)
        scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
    for i, j in T.Parallel(block_M, dim):
        acc_o[i, j] *= scores_scale[i]
    for i, j in T.Parallel(block_M, block_N):
        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
    T.reduce_sum(acc_s, scores_sum, dim=1)
    for i in T.Parallel(block_M):
        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
    T.copy(acc_s, acc_s_cast)
    T.gemm(acc_s_cast, V_shared, acc_o, policy=policy)


def flash_fwd_kernel(
    batch: int,
    heads: int,
    kv_heads: int,
    seq_q: int,
    seq_kv: int,
    dim: int,
    causal: bool,
    sm_scale: float,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 64,
    block_N: int = 64,
    num_stages: int = 1,
    threads: int = 128,
) -> Any:
    """``(Q, K, V) -> (Output, LSE)``: ``softmax(sm_scale Q K^T [causal]) V`` and its row log-sum-exp."""
    groups = heads // kv_heads
    scale = sm_scale * LOG2_E  # scores in base 2
    q_shape = (batch, heads, seq_q, dim)
    kv_shape = (batch, kv_heads, seq_kv, dim)
    needs_kv_mask = seq_kv % block_N != 0

    @T.prim_func
    def flash_fwd(
        Q: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        Output: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        LSE: T.Tensor((batch, heads, seq_q), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum_dtype)
            scores_max = T.alloc_fragment((block_M,), accum_dtype)
            scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            scores_scale = T.alloc_fragment((block_M,), accum_dtype)
            scores_sum = T.alloc_fragment((block_M,), accum_dtype)
            logsum = T.alloc_fragment((block_M,), accum_dtype)
            kv_head = by // groups

            T.copy(Q[bz, by, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (
                T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if causal
                else T.ceildiv(seq_kv, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, kv_head, k * block_N : (k + 1) * block_N, :], K_shared)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            (bx * block_M + i >= k * block_N + j) & (k * block_N + j < seq_kv),
                            0,
                            -T.infinity(accum_dtype),
                        )
                elif needs_kv_mask:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_kv, 0, -T.infinity(accum_dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, kv_head, k * block_N : (k + 1) * block_N, :], V_shared)
                online_softmax_step(
                    acc_s, acc_s_cast, acc_o, V_shared, scores_max, scores_max_prev, scores_scale,
                    scores_sum, logsum, scale, block_M, block_N, dim, accum_dtype,
                )

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_M):
                # natural log: LSE = max * sm_scale + ln(sum), from the base-2 running values
                logsum[i] = (T.log2(logsum[i]) + scores_max[i] * scale) * LN_2
            T.copy(acc_o, Output[bz, by, bx * block_M : (bx + 1) * block_M, :])
            T.copy(logsum, LSE[bz, by, bx * block_M : (bx + 1) * block_M])

    return flash_fwd


def flash_bwd_preprocess_kernel(
    batch: int,
    heads: int,
    seq_q: int,
    dim: int,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 64,
    threads: int = 128,
) -> Any:
    """``(Out, dO) -> Delta``: ``Delta[b, h, i] = sum_d Out[b, h, i, d] * dO[b, h, i, d]``."""
    shape = (batch, heads, seq_q, dim)

    @T.prim_func
    def flash_bwd_preprocess(
        Out: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        dO: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        Delta: T.Tensor((batch, heads, seq_q), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            o = T.alloc_fragment((block_M, dim), accum_dtype)
            do = T.alloc_fragment((block_M, dim), accum_dtype)
            delta = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(Out[bz, by, bx * block_M : (bx + 1) * block_M, :], o)
            T.copy(dO[bz, by, bx * block_M : (bx + 1) * block_M, :], do)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] *= do[i, j]
            T.reduce_sum(o, delta, dim=1)
            T.copy(delta, Delta[bz, by, bx * block_M : (bx + 1) * block_M])

    return flash_bwd_preprocess


def _head(by: Any, t: Any, groups: int, steps: Any) -> Any:
    """The query head of step ``t`` of KV head ``by``'s walk (``steps`` query tiles per head)."""
    return by * groups + t // steps


def _rows(first: Any, t: Any, steps: Any, block_M: int) -> Any:
    """The query rows of step ``t``: tile ``first + t % steps``."""
    tile = first + t % steps
    return slice(tile * block_M, (tile + 1) * block_M)


def flash_bwd_dkdv_kernel(
    batch: int,
    heads: int,
    kv_heads: int,
    seq_q: int,
    seq_kv: int,
    dim: int,
    causal: bool,
    sm_scale: float,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 64,
    block_N: int = 64,
    num_stages: int = 1,
    threads: int = 128,
) -> Any:
    """``(Q, K, V, dO, LSE, Delta) -> (dK, dV)``, summed over the query heads of each KV head."""
    groups = heads // kv_heads
    scale = sm_scale * LOG2_E
    q_tiles = (seq_q + block_M - 1) // block_M
    q_shape = (batch, heads, seq_q, dim)
    kv_shape = (batch, kv_heads, seq_kv, dim)
    row_shape = (batch, heads, seq_q)

    @T.prim_func
    def flash_bwd_dkdv(
        Q: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        dO: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        LSE: T.Tensor(row_shape, accum_dtype),  # type: ignore[valid-type]
        Delta: T.Tensor(row_shape, accum_dtype),  # type: ignore[valid-type]
        dK: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        dV: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_kv, block_N), kv_heads, batch, threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            dO_shared = T.alloc_shared((block_M, dim), dtype)
            lse_shared = T.alloc_shared((block_M,), accum_dtype)
            delta_shared = T.alloc_shared((block_M,), accum_dtype)
            p_t = T.alloc_fragment((block_N, block_M), accum_dtype)
            p_t_cast = T.alloc_fragment((block_N, block_M), dtype)
            ds_t = T.alloc_fragment((block_N, block_M), accum_dtype)
            ds_t_cast = T.alloc_fragment((block_N, block_M), dtype)
            dv = T.alloc_fragment((block_N, dim), accum_dtype)
            dk = T.alloc_fragment((block_N, dim), accum_dtype)

            T.copy(K[bz, by, bx * block_N : (bx + 1) * block_N, :], K_shared)
            T.copy(V[bz, by, bx * block_N : (bx + 1) * block_N, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            # causal: query tiles wholly above this key tile see none of it; at least one
            # tile per head is visited (masked to zero) so the loop is never empty
            first = T.min(bx * block_N // block_M, q_tiles - 1) if causal else 0
            steps = q_tiles - first
            for t in T.Pipelined(groups * steps, num_stages=num_stages):
                # head and query tile of step t, inlined (a binding inside a pipelined loop
                # is not something the pipeliner may split across stages)
                T.copy(Q[bz, _head(by, t, groups, steps), _rows(first, t, steps, block_M), :], Q_shared)
                T.copy(LSE[bz, _head(by, t, groups, steps), _rows(first, t, steps, block_M)], lse_shared)
                T.clear(p_t)
                T.gemm(K_shared, Q_shared, p_t, transpose_B=True)
                for i, j in T.Parallel(block_N, block_M):
                    q_row = (first + t % steps) * block_M + j
                    valid = (q_row < seq_q) & (bx * block_N + i < seq_kv)
                    if causal:
                        valid = valid & (q_row >= bx * block_N + i)
                    p_t[i, j] = T.if_then_else(valid, T.exp2(p_t[i, j] * scale - lse_shared[j] * LOG2_E), 0)
                T.copy(dO[bz, _head(by, t, groups, steps), _rows(first, t, steps, block_M), :], dO_shared)
                T.copy(Delta[bz, _head(by, t, groups, steps), _rows(first, t, steps, block_M)], delta_shared)
                T.clear(ds_t)
                T.gemm(V_shared, dO_shared, ds_t, transpose_B=True)  # dP^T
                T.copy(p_t, p_t_cast)
                T.gemm(p_t_cast, dO_shared, dv)
                for i, j in T.Parallel(block_N, block_M):
                    ds_t[i, j] = p_t[i, j] * (ds_t[i, j] - delta_shared[j])
                T.copy(ds_t, ds_t_cast)
                T.gemm(ds_t_cast, Q_shared, dk)
            for i, j in T.Parallel(block_N, dim):
                dk[i, j] *= sm_scale
            T.copy(dv, dV[bz, by, bx * block_N : (bx + 1) * block_N, :])
            T.copy(dk, dK[bz, by, bx * block_N : (bx + 1) * block_N, :])

    return flash_bwd_dkdv


def flash_bwd_dq_kernel(
    batch: int,
    heads: int,
    kv_heads: int,
    seq_q: int,
    seq_kv: int,
    dim: int,
    causal: bool,
    sm_scale: float,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 64,
    block_N: int = 64,
    num_stages: int = 1,
    threads: int = 128,
) -> Any:
    """``(Q, K, V, dO, LSE, Delta) -> dQ``."""
    groups = heads // kv_heads
    scale = sm_scale * LOG2_E
    q_shape = (batch, heads, seq_q, dim)
    kv_shape = (batch, kv_heads, seq_kv, dim)
    row_shape = (batch, heads, seq_q)

    @T.prim_func
    def flash_bwd_dq(
        Q: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        dO: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        LSE: T.Tensor(row_shape, accum_dtype),  # type: ignore[valid-type]
        Delta: T.Tensor(row_shape, accum_dtype),  # type: ignore[valid-type]
        dQ: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            dO_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            lse = T.alloc_fragment((block_M,), accum_dtype)
            delta = T.alloc_fragment((block_M,), accum_dtype)
            s = T.alloc_fragment((block_M, block_N), accum_dtype)
            dp = T.alloc_fragment((block_M, block_N), accum_dtype)
            ds_cast = T.alloc_fragment((block_M, block_N), dtype)
            dq = T.alloc_fragment((block_M, dim), accum_dtype)
            kv_head = by // groups

            T.copy(Q[bz, by, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.copy(dO[bz, by, bx * block_M : (bx + 1) * block_M, :], dO_shared)
            T.copy(LSE[bz, by, bx * block_M : (bx + 1) * block_M], lse)
            T.copy(Delta[bz, by, bx * block_M : (bx + 1) * block_M], delta)
            T.clear(dq)
            loop_range = (
                T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if causal
                else T.ceildiv(seq_kv, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, kv_head, k * block_N : (k + 1) * block_N, :], K_shared)
                T.copy(V[bz, kv_head, k * block_N : (k + 1) * block_N, :], V_shared)
                T.clear(s)
                T.gemm(Q_shared, K_shared, s, transpose_B=True)
                T.clear(dp)
                T.gemm(dO_shared, V_shared, dp, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    valid = k * block_N + j < seq_kv
                    if causal:
                        valid = valid & (bx * block_M + i >= k * block_N + j)
                    s[i, j] = T.if_then_else(
                        valid, T.exp2(s[i, j] * scale - lse[i] * LOG2_E) * (dp[i, j] - delta[i]), 0
                    )
                T.copy(s, ds_cast)
                T.gemm(ds_cast, K_shared, dq)
            for i, j in T.Parallel(block_M, dim):
                dq[i, j] *= sm_scale
            T.copy(dq, dQ[bz, by, bx * block_M : (bx + 1) * block_M, :])

    return flash_bwd_dq
