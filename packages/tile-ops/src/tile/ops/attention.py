"""FlashAttention forward written in tile.lang: ``flash_attention(q, k, v, causal=)``.

One block computes ``block_M`` query rows of one (batch, head). It walks the key/value
sequence in ``block_N`` tiles inside ``T.Pipelined``, keeping an online softmax: the
running row maximum ``scores_max``, the running denominator ``logsum`` and the
unnormalized output ``acc_o``, rescaled by ``exp2((old_max - new_max) * scale)``
whenever the maximum grows. Scores are computed in base 2 (``scale`` folds in
``log2(e)``). The fp32 score tile ``acc_s`` is cast into a fragment of the input type
that is the A operand of the ``P @ V`` gemm.

Tensors are laid out ``(batch, seq_len, heads, dim)``. A sequence length that is not
a multiple of the blocks is supported: key columns past the end are masked to
``-inf`` and query rows past the end are never stored.

Example::

    >>> import numpy as np
    >>> from tile.ops.attention import flash_attention
    >>> q = np.zeros((1, 5, 1, 16), "float32"); v = np.ones((1, 5, 1, 16), "float32")
    >>> float(flash_attention(q, q, v, target="cpu")[0, 4, 0, 3])
    1.0
"""

from __future__ import annotations

import functools
import math
from typing import Any

import tile.lang as tilelang
import tile.lang.language as T

from ._src.errors import bad_argument
from ._src.flash import online_softmax_step

LOG2_E = 1.4426950408889634


def flash_attention_kernel(
    batch: int,
    heads: int,
    seq_len: int,
    dim: int,
    is_causal: bool,
    dtype: str = "float16",
    accum_dtype: str = "float32",
    block_M: int = 64,
    block_N: int = 64,
    num_stages: int = 1,
    threads: int = 128,
) -> Any:
    """``O = softmax(Q K^T / sqrt(dim) [+ causal mask]) V`` for (batch, seq_len, heads, dim)."""
    scale = LOG2_E / math.sqrt(dim)
    shape = (batch, seq_len, heads, dim)
    needs_kv_mask = seq_len % block_N != 0

    @T.prim_func
    def flash_attention(
        Q: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        Output: T.Tensor(shape, dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
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

            T.copy(Q[bz, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal
                else T.ceildiv(seq_len, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum_dtype)
                        )
                elif needs_kv_mask:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum_dtype))
                else:
                    T.clear(acc_s)
                # FullRow: each warp owns whole rows of both accumulators, so the row
                # softmax stays in a warp and acc_s_cast is the P V gemm's A operand in
                # place (a Square split would exchange the tile through shared memory
                # and replicate A over the warp columns)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N : (k + 1) * block_N, by, :], V_shared)
                online_softmax_step(
                    acc_s, acc_s_cast, acc_o, V_shared, scores_max, scores_max_prev, scores_scale,
                    scores_sum, logsum, scale, block_M, block_N, dim, accum_dtype,
                )

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M : (bx + 1) * block_M, by, :])

    return flash_attention


@functools.cache
def _compiled(shape: tuple[int, ...], causal: bool, dtype: str, block: int, target: str) -> Any:
    batch, seq_len, heads, dim = shape
    func = flash_attention_kernel(batch, heads, seq_len, dim, causal, dtype, block_M=block, block_N=block)
    return tilelang.compile(func, out_idx=[-1], target=target)


def flash_attention(
    q: Any, k: Any, v: Any, causal: bool = False, block: int = 64, target: str = "auto"
) -> Any:
    """Scaled dot-product attention over (batch, seq_len, heads, dim) arrays of one dtype."""
    if len(q.shape) != 4 or tuple(q.shape) != tuple(k.shape) or tuple(q.shape) != tuple(v.shape):
        raise bad_argument(
            "flash_attention",
            "q" if len(q.shape) != 4 else "k" if tuple(q.shape) != tuple(k.shape) else "v",
            f"does not match: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}",
            "q, k, v share one (batch, seq_len, heads, dim) shape here; tile.ops.flash_attention "
            "takes SDPA's layout with grouped heads",
        )
    dtype = str(q.dtype).removeprefix("torch.")
    return _compiled(tuple(int(s) for s in q.shape), bool(causal), dtype, block, target)(q, k, v)
