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

The online softmax (``online_softmax_buffers`` / ``_init`` / ``_step`` / ``_finish`` and
``mask_scores``) is shared by every forward kernel of the family: this forward (also in the
(batch, seq, heads, dim) layout of ``tile.ops.attention``), flash-decoding's split kernel
(``decode.py``) and MLA decoding (``tile.ops.mla``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import tile.lang.language as T

from .configs import Tiling

LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453


# --- the online softmax every forward kernel of the family shares (flash, decode, MLA) -------


def online_softmax_buffers(
    rows: int, cols: int, dim: int, dtype: str, accum_dtype: str, cast_shared: bool = False
) -> Any:
    """Inside a kernel: ``acc_s`` (rows, cols) scores, ``acc_s_cast`` (their ``dtype`` copy, the
    ``P V`` gemm's A operand: a fragment, or shared memory with ``cast_shared`` for a gemm whose
    warps split columns), ``acc_o`` (rows, dim), and the row vectors ``scores_max``,
    ``scores_max_prev``, ``scores_scale``, ``scores_sum``, ``logsum``, in that order."""
    alloc_cast = T.alloc_shared if cast_shared else T.alloc_fragment
    return (
        T.alloc_fragment((rows, cols), accum_dtype),
        alloc_cast((rows, cols), dtype),
        T.alloc_fragment((rows, dim), accum_dtype),
        *(T.alloc_fragment((rows,), accum_dtype) for _ in range(5)),
    )


@T.macro
def online_softmax_init(acc_o, logsum, scores_max, accum_dtype):  # type: ignore[no-untyped-def]
    """No key seen yet: a zero output and denominator, a running max of ``-inf``."""
    T.fill(acc_o, 0)
    T.fill(logsum, 0)
    T.fill(scores_max, -T.infinity(accum_dtype))


@T.macro
def mask_scores(acc_s, rows, cols, key0, seq_kv, query_pos, accum_dtype):  # type: ignore[no-untyped-def]
    """Start a score tile of keys ``key0 ..`` at 0 where row ``i`` sees key ``key0 + j`` and at
    ``-inf`` elsewhere: keys past ``seq_kv``, and with ``query_pos`` (causal) keys past
    ``query_pos(i)``, the position of row ``i``'s query."""
    if query_pos is not None:
        for i, j in T.Parallel(rows, cols):
            acc_s[i, j] = T.if_then_else(
                (key0 + j < seq_kv) & (key0 + j <= query_pos(i)), 0, -T.infinity(accum_dtype)
            )
    elif seq_kv % cols != 0:
        for i, j in T.Parallel(rows, cols):
            acc_s[i, j] = T.if_then_else(key0 + j < seq_kv, 0, -T.infinity(accum_dtype))
    else:
        T.clear(acc_s)


@T.macro
def online_softmax_step(  # type: ignore[no-untyped-def]
    acc_s, acc_s_cast, acc_o, V_shared, scores_max, scores_max_prev, scores_scale, scores_sum, logsum,
    scale, block_M, block_N, dim, accum_dtype, policy=T.GemmWarpPolicy.FullRow, empty_rows=False,
):
    """One key tile of FlashAttention's forward, after ``acc_s += Q K^T`` (masked, base-2 scores
    times ``1 / scale``): raise the running row max, rescale ``acc_o`` and ``logsum`` by
    ``exp2((old - new) * scale)``, exponentiate the tile and add ``P V`` into ``acc_o``. Rows of
    ``block_M`` queries, ``block_N`` keys, ``dim`` values. With the default ``policy``
    (``GemmWarpPolicy.FullRow``) the accumulators' warps own whole rows, so the row statistics
    stay inside a warp and ``acc_s_cast`` is a fragment; a policy that splits columns needs
    ``acc_s_cast`` in shared memory. ``empty_rows``: a row may have seen no visible key yet
    (its max still ``-inf``); it keeps a zero output and denominator. Layout inference visits
    the loops in this order: scaling ``acc_o`` last lets MLA's column-split tiles (16 key
    columns on 256 threads) infer one layout for the row vectors."""
    T.copy(scores_max, scores_max_prev)
    # the new running max: a row this key tile masks entirely (causal, block_M > block_N)
    # keeps its old one (-inf here would make its rescale factor exp2(+inf)); written by the
    # reduction alone, so the row vectors take their layouts from the tiles' reductions
    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
    for i in T.Parallel(block_M):
        if empty_rows:
            scores_scale[i] = T.if_then_else(
                scores_max_prev[i] == -T.infinity(accum_dtype),
                0,
                T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale),
            )
        else:
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
    for i, j in T.Parallel(block_M, block_N):
        if empty_rows:
            acc_s[i, j] = T.if_then_else(
                scores_max[i] == -T.infinity(accum_dtype),
                0,
                T.exp2(acc_s[i, j] * scale - scores_max[i] * scale),
            )
        else:
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
    T.reduce_sum(acc_s, scores_sum, dim=1)
    T.copy(acc_s, acc_s_cast)
    for i in T.Parallel(block_M):
        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
    for i, j in T.Parallel(block_M, dim):
        acc_o[i, j] *= scores_scale[i]
    T.gemm(acc_s_cast, V_shared, acc_o, policy=policy)


@T.macro
def online_softmax_finish(  # type: ignore[no-untyped-def]
    acc_o, logsum, scores_max, scale, rows, dim, accum_dtype, lse=False, empty_rows=False
):
    """Normalize ``acc_o`` by ``logsum``; with ``lse``, turn ``logsum`` into the rows' natural
    log-sum-exp ``max * sm_scale + ln(sum)`` (from the base-2 running values). ``empty_rows``:
    a row that saw no key gets a zero output and an LSE of ``-inf`` (weight zero)."""
    for i, j in T.Parallel(rows, dim):
        if empty_rows:
            acc_o[i, j] = T.if_then_else(logsum[i] > 0, acc_o[i, j] / logsum[i], 0)
        else:
            acc_o[i, j] /= logsum[i]
    if lse:
        for i in T.Parallel(rows):
            if empty_rows:
                logsum[i] = T.if_then_else(
                    logsum[i] > 0,
                    (T.log2(logsum[i]) + scores_max[i] * scale) * LN_2,
                    -T.infinity(accum_dtype),
                )
            else:
                logsum[i] = (T.log2(logsum[i]) + scores_max[i] * scale) * LN_2


# --- FlashAttention forward and backward ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FlashProblem:
    """The sizes, dtypes and tiling one FlashAttention problem's kernels share."""

    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    dim: int
    causal: bool
    sm_scale: float
    dtype: str
    accum_dtype: str
    tiling: Tiling

    @property
    def groups(self) -> int:
        """Query heads per KV head."""
        return self.heads // self.kv_heads

    @property
    def scale(self) -> float:
        """``sm_scale`` for base-2 scores."""
        return self.sm_scale * LOG2_E

    @property
    def q_shape(self) -> tuple[int, int, int, int]:
        """Q, dO and dQ: (batch, heads, seq_q, dim)."""
        return (self.batch, self.heads, self.seq_q, self.dim)

    @property
    def kv_shape(self) -> tuple[int, int, int, int]:
        """K, V, dK and dV: (batch, kv_heads, seq_kv, dim)."""
        return (self.batch, self.kv_heads, self.seq_kv, self.dim)

    @property
    def q_tiles(self) -> int:
        """Query tiles of ``tiling.block_M`` rows (the last may be partial)."""
        return (self.seq_q + self.tiling.block_M - 1) // self.tiling.block_M

    def key_tiles(self, bx: Any) -> Any:
        """The key tiles query tile ``bx`` reads: all, or causally those up to its last row."""
        block_M, block_N = self.tiling.block_M, self.tiling.block_N
        tiles = T.ceildiv(self.seq_kv, block_N)
        return T.min(tiles, T.ceildiv((bx + 1) * block_M, block_N)) if self.causal else tiles

    def top_left(self, bx: Any) -> Callable[[Any], Any] | None:
        """Causal (aligned at the top left): the position of query row ``i`` of tile ``bx``."""
        return (lambda i: bx * self.tiling.block_M + i) if self.causal else None


def span(tile: Any, size: int) -> slice:
    """Rows ``tile * size ..`` of one ``size``-row tile."""
    return slice(tile * size, (tile + 1) * size)


def tile_of(tensor: Any, b: Any, head: Any, rows: Any, seq_major: bool = False) -> Any:
    """The ``rows`` of one (batch, head) of a (batch, heads, seq, dim) tensor, or of a
    (batch, seq, heads, dim) one with ``seq_major``; 3-D (no ``dim``) row tensors too."""
    index = (b, rows, head) if seq_major else (b, head, rows)
    return tensor[index] if len(tensor.shape) == 3 else tensor[(*index, slice(None))]


def forward_body(p: FlashProblem, seq_major: bool = False) -> Any:
    """The forward kernel's body as a macro of ``(Q, K, V, Output, LSE)`` (``LSE`` ``None``: not
    stored), over (batch, heads, seq, dim) tensors or, with ``seq_major``, (batch, seq, heads, dim)."""
    block_M, block_N, dim, accum_dtype = p.tiling.block_M, p.tiling.block_N, p.dim, p.accum_dtype
    threads = p.tiling.threads

    @T.macro
    def flash_forward(Q, K, V, Output, LSE):  # type: ignore[no-untyped-def]
        with T.Kernel(T.ceildiv(p.seq_q, block_M), p.heads, p.batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), p.dtype)
            K_shared = T.alloc_shared((block_N, dim), p.dtype)
            V_shared = T.alloc_shared((block_N, dim), p.dtype)
            acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum = (
                online_softmax_buffers(block_M, block_N, dim, p.dtype, accum_dtype)
            )

            T.copy(tile_of(Q, bz, by, span(bx, block_M), seq_major), Q_shared)
            online_softmax_init(acc_o, logsum, scores_max, accum_dtype)
            for k in T.Pipelined(p.key_tiles(bx), num_stages=p.tiling.num_stages):
                # the KV head inline, not bound: its bound then follows from by's (no copy guard)
                T.copy(tile_of(K, bz, by // p.groups, span(k, block_N), seq_major), K_shared)
                mask_scores(acc_s, block_M, block_N, k * block_N, p.seq_kv, p.top_left(bx), accum_dtype)
                # FullRow: each warp owns whole rows of both accumulators, so the row
                # softmax stays in a warp and acc_s_cast is the P V gemm's A operand in
                # place (a Square split would exchange the tile through shared memory
                # and replicate A over the warp columns)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(tile_of(V, bz, by // p.groups, span(k, block_N), seq_major), V_shared)
                online_softmax_step(
                    acc_s, acc_s_cast, acc_o, V_shared, scores_max, scores_max_prev, scores_scale,
                    scores_sum, logsum, p.scale, block_M, block_N, dim, accum_dtype,
                )
            with_lse = LSE is not None
            online_softmax_finish(acc_o, logsum, scores_max, p.scale, block_M, dim, accum_dtype, with_lse)
            T.copy(acc_o, tile_of(Output, bz, by, span(bx, block_M), seq_major))
            if LSE is not None:
                T.copy(logsum, tile_of(LSE, bz, by, span(bx, block_M)))

    return flash_forward


def _forward(p: FlashProblem) -> Any:
    """``(Q, K, V) -> (Output, LSE)``: ``softmax(sm_scale Q K^T [causal]) V`` and its row log-sum-exp."""
    q_shape, kv_shape = p.q_shape, p.kv_shape
    body = forward_body(p)

    @T.prim_func
    def flash_fwd(
        Q: T.Tensor(q_shape, p.dtype),  # type: ignore[valid-type]
        K: T.Tensor(kv_shape, p.dtype),  # type: ignore[valid-type]
        V: T.Tensor(kv_shape, p.dtype),  # type: ignore[valid-type]
        Output: T.Tensor(q_shape, p.dtype),  # type: ignore[valid-type]
        LSE: T.Tensor((p.batch, p.heads, p.seq_q), p.accum_dtype),  # type: ignore[valid-type]
    ):
        body(Q, K, V, Output, LSE)

    return flash_fwd


def _backward_preprocess(p: FlashProblem) -> Any:
    """``(Out, dO) -> Delta``: ``Delta[b, h, i] = sum_d Out[b, h, i, d] * dO[b, h, i, d]``."""
    batch, heads, seq_q, dim, block_M = p.batch, p.heads, p.seq_q, p.dim, p.tiling.block_M
    dtype, accum_dtype, shape = p.dtype, p.accum_dtype, (batch, heads, seq_q, dim)

    @T.prim_func
    def flash_bwd_preprocess(
        Out: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        dO: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        Delta: T.Tensor((batch, heads, seq_q), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=p.tiling.threads) as (bx, by, bz):
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


def _backward_dkdv(p: FlashProblem) -> Any:
    """``(Q, K, V, dO, LSE, Delta) -> (dK, dV)``, summed over the query heads of each KV head."""
    block_M, block_N, threads = p.tiling.block_M, p.tiling.block_N, p.tiling.threads
    dim, dtype, accum_dtype = p.dim, p.dtype, p.accum_dtype
    groups, scale, seq_q, seq_kv, causal = p.groups, p.scale, p.seq_q, p.seq_kv, p.causal
    q_tiles, q_shape, kv_shape = p.q_tiles, p.q_shape, p.kv_shape

    @T.prim_func
    def flash_bwd_dkdv(
        Q: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        dO: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        LSE: T.Tensor((p.batch, p.heads, seq_q), accum_dtype),  # type: ignore[valid-type]
        Delta: T.Tensor((p.batch, p.heads, seq_q), accum_dtype),  # type: ignore[valid-type]
        dK: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        dV: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_kv, block_N), p.kv_heads, p.batch, threads=threads) as (bx, by, bz):
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

            T.copy(K[bz, by, span(bx, block_N), :], K_shared)
            T.copy(V[bz, by, span(bx, block_N), :], V_shared)
            T.clear(dv)
            T.clear(dk)
            # causal: query tiles wholly above this key tile see none of it; at least one
            # tile per head is visited (masked to zero) so the loop is never empty
            first = T.min(bx * block_N // block_M, q_tiles - 1) if causal else 0
            steps = q_tiles - first
            for t in T.Pipelined(groups * steps, num_stages=p.tiling.num_stages):
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
                dk[i, j] *= p.sm_scale
            T.copy(dv, dV[bz, by, span(bx, block_N), :])
            T.copy(dk, dK[bz, by, span(bx, block_N), :])

    return flash_bwd_dkdv


def _backward_dq(p: FlashProblem) -> Any:
    """``(Q, K, V, dO, LSE, Delta) -> dQ``."""
    block_M, block_N, threads = p.tiling.block_M, p.tiling.block_N, p.tiling.threads
    dim, dtype, accum_dtype = p.dim, p.dtype, p.accum_dtype
    row_shape = (p.batch, p.heads, p.seq_q)

    @T.prim_func
    def flash_bwd_dq(
        Q: T.Tensor((*row_shape, dim), dtype),  # type: ignore[valid-type]
        K: T.Tensor((p.batch, p.kv_heads, p.seq_kv, dim), dtype),  # type: ignore[valid-type]
        V: T.Tensor((p.batch, p.kv_heads, p.seq_kv, dim), dtype),  # type: ignore[valid-type]
        dO: T.Tensor((*row_shape, dim), dtype),  # type: ignore[valid-type]
        LSE: T.Tensor(row_shape, accum_dtype),  # type: ignore[valid-type]
        Delta: T.Tensor(row_shape, accum_dtype),  # type: ignore[valid-type]
        dQ: T.Tensor((*row_shape, dim), dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(p.seq_q, block_M), p.heads, p.batch, threads=threads) as (bx, by, bz):
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
            kv_head = by // p.groups

            T.copy(Q[bz, by, span(bx, block_M), :], Q_shared)
            T.copy(dO[bz, by, span(bx, block_M), :], dO_shared)
            T.copy(LSE[bz, by, span(bx, block_M)], lse)
            T.copy(Delta[bz, by, span(bx, block_M)], delta)
            T.clear(dq)
            for k in T.Pipelined(p.key_tiles(bx), num_stages=p.tiling.num_stages):
                T.copy(K[bz, kv_head, span(k, block_N), :], K_shared)
                T.copy(V[bz, kv_head, span(k, block_N), :], V_shared)
                T.clear(s)
                T.gemm(Q_shared, K_shared, s, transpose_B=True)
                T.clear(dp)
                T.gemm(dO_shared, V_shared, dp, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    valid = k * block_N + j < p.seq_kv
                    if p.causal:
                        valid = valid & (bx * block_M + i >= k * block_N + j)
                    s[i, j] = T.if_then_else(
                        valid, T.exp2(s[i, j] * p.scale - lse[i] * LOG2_E) * (dp[i, j] - delta[i]), 0
                    )
                T.copy(s, ds_cast)
                T.gemm(ds_cast, K_shared, dq)
            for i, j in T.Parallel(block_M, dim):
                dq[i, j] *= p.sm_scale
            T.copy(dq, dQ[bz, by, span(bx, block_M), :])

    return flash_bwd_dq


def _backward_fused(p: FlashProblem, head_splits: int = 1) -> Any:
    """``(Q, K, V, dO, LSE, Delta) -> (dQ, dK, dV)`` in one kernel: one block per (batch, KV head)
    walks the key tiles, and for each every query tile of every query head sharing the KV head.
    With whole heads per block, dQ needs no second kernel: the block adds each step's
    ``dS K`` into its own on-chip (groups * seq_q, dim) accumulator, so a step costs five tile
    products (FlashAttention-2's count) instead of the split kernels' seven. The scores are
    query-major (``S = Q K^T``) against K and V transposed once per key tile, so no product
    reads a per-step operand transposed as B; ``dV += P^T dO`` and ``dK += dS^T Q`` read their
    A transposed. For targets that run a block on one thread with a large cache: few blocks
    (``batch * kv_heads``) and a dQ accumulator per block (``attention_bwd_fused``).

    ``head_splits`` > 1 splits each KV head's query heads over that many blocks (MQA with one
    batch would otherwise be one block on one core, and its whole group's dQ would overflow
    the cache): each block then holds the dQ of its ``groups // head_splits`` heads only, and
    writes its share of dK and dV to its own slice of (head_splits, batch, kv_heads, seq_kv,
    dim) ``accum_dtype`` outputs, which the caller sums over the first axis."""
    block_M, block_N, threads = p.tiling.block_M, p.tiling.block_N, p.tiling.threads
    dim, dtype, accum_dtype = p.dim, p.dtype, p.accum_dtype
    scale, seq_q, seq_kv, causal = p.scale, p.seq_q, p.seq_kv, p.causal
    if head_splits < 1 or p.groups % head_splits:
        raise ValueError(f"head_splits={head_splits} does not divide {p.groups} query heads per KV head")
    groups = p.groups // head_splits  # query heads per block
    splits = head_splits
    q_tiles, q_shape, kv_shape = p.q_tiles, p.q_shape, p.kv_shape
    kv_tiles = (seq_kv + block_N - 1) // block_N
    rows = q_tiles * block_M  # one head's rows of the dQ accumulator (whole tiles)
    dkv_shape = kv_shape if splits == 1 else (splits, *kv_shape)
    dkv_dtype = dtype if splits == 1 else accum_dtype

    @T.prim_func
    def flash_bwd_fused(
        Q: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(kv_shape, dtype),  # type: ignore[valid-type]
        dO: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        LSE: T.Tensor((p.batch, p.heads, seq_q), accum_dtype),  # type: ignore[valid-type]
        Delta: T.Tensor((p.batch, p.heads, seq_q), accum_dtype),  # type: ignore[valid-type]
        dQ: T.Tensor(q_shape, dtype),  # type: ignore[valid-type]
        dK: T.Tensor(dkv_shape, dkv_dtype),  # type: ignore[valid-type]
        dV: T.Tensor(dkv_shape, dkv_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(p.kv_heads * splits, p.batch, threads=threads) as (bh, bz):
            by = bh // splits  # the KV head; query heads by * p.groups + part * groups ...
            part = bh % splits
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            KT_shared = T.alloc_shared((dim, block_N), dtype)
            VT_shared = T.alloc_shared((dim, block_N), dtype)
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            dO_shared = T.alloc_shared((block_M, dim), dtype)
            dq_all = T.alloc_shared((groups * rows, dim), accum_dtype)
            lse = T.alloc_fragment((block_M,), accum_dtype)
            delta = T.alloc_fragment((block_M,), accum_dtype)
            s = T.alloc_fragment((block_M, block_N), accum_dtype)
            dp = T.alloc_fragment((block_M, block_N), accum_dtype)
            p_cast = T.alloc_fragment((block_M, block_N), dtype)
            ds_cast = T.alloc_fragment((block_M, block_N), dtype)
            dq = T.alloc_fragment((block_M, dim), accum_dtype)
            dv = T.alloc_fragment((block_N, dim), accum_dtype)
            dk = T.alloc_fragment((block_N, dim), accum_dtype)

            T.clear(dq_all)
            for kt in T.serial(kv_tiles):
                T.copy(K[bz, by, span(kt, block_N), :], K_shared)
                T.copy(V[bz, by, span(kt, block_N), :], V_shared)
                for d, n in T.Parallel(dim, block_N):
                    KT_shared[d, n] = K_shared[n, d]
                    VT_shared[d, n] = V_shared[n, d]
                T.clear(dv)
                T.clear(dk)
                # causal: query tiles wholly above this key tile see none of it
                first = T.min(kt * block_N // block_M, q_tiles - 1) if causal else 0
                steps = q_tiles - first
                for t in T.serial(groups * steps):
                    tile = first + t % steps
                    head = _head(bh, t, groups, steps)  # = by * p.groups + part * groups + t // steps
                    T.copy(Q[bz, head, span(tile, block_M), :], Q_shared)
                    T.copy(dO[bz, head, span(tile, block_M), :], dO_shared)
                    T.copy(LSE[bz, head, span(tile, block_M)], lse)
                    T.copy(Delta[bz, head, span(tile, block_M)], delta)
                    # hidden keys start at -inf, so their probabilities come out 0 with no test
                    # in the exponential's loop; query rows past seq_q read zeros (Q, dO, LSE,
                    # Delta), so their dS is 0 and their dQ rows are never stored
                    mask_scores(s, block_M, block_N, kt * block_N, seq_kv, p.top_left(tile), accum_dtype)
                    T.gemm(Q_shared, KT_shared, s)
                    T.clear(dp)
                    T.gemm(dO_shared, VT_shared, dp)
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.exp2(s[i, j] * scale - lse[i] * LOG2_E)
                        dp[i, j] = s[i, j] * (dp[i, j] - delta[i])
                    T.copy(s, p_cast)
                    T.copy(dp, ds_cast)
                    T.gemm(p_cast, dO_shared, dv, transpose_A=True)
                    T.gemm(ds_cast, Q_shared, dk, transpose_A=True)
                    T.gemm(ds_cast, K_shared, dq, clear_accum=True)
                    for i, j in T.Parallel(block_M, dim):
                        dq_all[(t // steps) * rows + tile * block_M + i, j] += dq[i, j] * p.sm_scale
                for i, j in T.Parallel(block_N, dim):
                    dk[i, j] *= p.sm_scale
                if splits == 1:
                    T.copy(dv, dV[bz, by, span(kt, block_N), :])
                    T.copy(dk, dK[bz, by, span(kt, block_N), :])
                else:
                    T.copy(dv, dV[part, bz, by, span(kt, block_N), :])
                    T.copy(dk, dK[part, bz, by, span(kt, block_N), :])
            for g in T.serial(groups):
                T.copy(dq_all[g * rows : g * rows + seq_q, :], dQ[bz, bh * groups + g, :, :])

    return flash_bwd_fused


_PARTS = {
    "fwd": _forward,
    "preprocess": _backward_preprocess,
    "dkdv": _backward_dkdv,
    "dq": _backward_dq,
    "fused": _backward_fused,
}


def flash_kernel(part: str, *problem: Any, **options: Any) -> Any:
    """The FlashAttention kernel ``part`` (``"fwd"``, ``"preprocess"``, ``"dkdv"``, ``"dq"``,
    ``"fused"``) of one problem, given by ``FlashProblem``'s fields in order (batch, heads,
    kv_heads, seq_q, seq_kv, dim, causal, sm_scale, dtype, accum_dtype, tiling), and the part's
    options (``head_splits=`` of the fused backward); ``flash_fwd_kernel`` and the backward
    factories name each part."""
    return _PARTS[part](FlashProblem(*problem), **options)


flash_fwd_kernel = functools.partial(flash_kernel, "fwd")
"""``(Q, K, V) -> (Output, LSE)`` (``flash_kernel``'s arguments after ``part``)."""
flash_bwd_preprocess_kernel = functools.partial(flash_kernel, "preprocess")
"""``(Out, dO) -> Delta``, the backward's row sums ``dO . O``."""
flash_bwd_dkdv_kernel = functools.partial(flash_kernel, "dkdv")
"""``(Q, K, V, dO, LSE, Delta) -> (dK, dV)``, summed over the query heads of each KV head."""
flash_bwd_dq_kernel = functools.partial(flash_kernel, "dq")
"""``(Q, K, V, dO, LSE, Delta) -> dQ``."""
flash_bwd_fused_kernel = functools.partial(flash_kernel, "fused")
"""``(Q, K, V, dO, LSE, Delta) -> (dQ, dK, dV)`` in one kernel of one block per (batch, KV head),
or ``head_splits`` of them (dK and dV then per split, to be summed)."""
