"""Mamba-2 state-space duality (SSD) chunked scan, written in tile.lang.

The SSM recurrence per head (``A`` a negative scalar per head, ``dt`` the step)::

    h_t = exp(dt_t * A) * h_{t-1} + dt_t * x_t B_t^T      (h: headdim x dstate)
    y_t = h_t C_t + D * x_t

is evaluated in chunks of ``chunk_size`` steps. With ``dA_cumsum`` the running sum of
``dt * A`` inside each chunk (so ``exp(dA_cumsum[l] - dA_cumsum[s])`` is the decay
from step ``s`` to step ``l`` of the same chunk):

- ``chunk_state``: the state each chunk produces from zero,
  ``states[c] = sum_s exp(dA_cumsum[last] - dA_cumsum[s]) * dt[s] * x[s]^T B[s]``.
- (state passing, between the two, is a short sequential scan over chunks.)
- ``chunk_scan``: the outputs, from the state entering the chunk plus the causal
  intra-chunk term ``y[l] = exp(dA_cumsum[l]) * C[l] prev_state^T
  + sum_{s<=l} (C[l] . B[s]) exp(dA_cumsum[l] - dA_cumsum[s]) dt[s] x[s] + D x[l]``,
  where ``cb = C B^T`` per chunk is an input (as in Mamba-2's kernels).

Shapes: x (batch, seqlen, nheads, headdim); B, C (batch, seqlen, ngroups, dstate);
dt, dA_cumsum (batch, nheads, nchunks, chunk_size); cb (batch, nchunks, ngroups,
chunk_size, chunk_size); states (batch, nchunks, nheads, headdim, dstate); D (nheads,).
``seqlen == nchunks * chunk_size``; heads ``h`` use group ``h // (nheads // ngroups)``.
"""

from __future__ import annotations

import functools
from typing import Any

import tile.lang as tilelang
import tile.lang.language as T

from ._src.configs import Tiling, tiled
from ._src.runtime import dtype_name, target_key

LOG2_E = 1.4426950408889634


def _check_chunking(nheads: int, ngroups: int, seqlen: int, chunk_size: int, *blocks: int) -> None:
    if seqlen % chunk_size:
        raise ValueError(f"seqlen {seqlen} must be a multiple of chunk_size {chunk_size} (pad the sequence)")
    if nheads % ngroups:
        raise ValueError(f"nheads {nheads} must be a multiple of ngroups {ngroups}")
    for block in blocks:
        if chunk_size % block:
            raise ValueError(f"block size {block} must divide chunk_size {chunk_size}")


@tiled(block_M=64, block_N=64, block_K=64, num_stages=2, threads=128)
def ssd_kernel(
    part: str,
    batch: int,
    nheads: int,
    ngroups: int,
    seqlen: int,
    chunk_size: int,
    headdim: int,
    dstate: int,
    dtype: str = "float16",
    accum_dtype: str = "float32",
    *,
    tiling: Tiling,
) -> Any:
    """The SSD kernel ``part`` of one problem (the sizes, dtypes and tiling the two share);
    ``chunk_state_kernel`` and ``chunk_scan_kernel`` name each part.

    - ``"state"``: ``(B, x, dt, dA_cumsum) -> states``; one block per (head, headdim x dstate
      tile, batch x chunk).
    - ``"scan"``: ``(cb, x, dt, dA_cumsum, C, prev_states, D) -> Output`` (batch, seqlen,
      nheads, headdim); one block per (head, chunk-rows x headdim tile, batch x chunk),
      ``dstate`` is one tile.

    The tiling is keyword arguments (``block_M=32, ...``) or one ``tiling=Tiling(...)``.
    """
    block_M, block_N, block_K = tiling.block_M, tiling.block_N, tiling.block_K
    num_stages, threads = tiling.num_stages, tiling.threads
    if part not in ("state", "scan"):
        raise ValueError(f"unknown SSD kernel part {part!r}; use 'state' or 'scan'")
    _check_chunking(nheads, ngroups, seqlen, chunk_size, block_K, *((block_M,) if part == "scan" else ()))
    nchunks = seqlen // chunk_size
    heads_per_group = nheads // ngroups
    p = LOG2_E

    @T.prim_func
    def chunk_state(
        B: T.Tensor((batch, seqlen, ngroups, dstate), dtype),  # type: ignore[valid-type]
        x: T.Tensor((batch, seqlen, nheads, headdim), dtype),  # type: ignore[valid-type]
        dt: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),  # type: ignore[valid-type]
        dA_cumsum: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),  # type: ignore[valid-type]
        Output: T.Tensor((batch, nchunks, nheads, headdim, dstate), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(
            nheads, T.ceildiv(headdim, block_M) * T.ceildiv(dstate, block_N), batch * nchunks, threads=threads
        ) as (bz, bx, by):
            x_shared = T.alloc_shared((block_K, block_M), dtype)
            x_local = T.alloc_fragment((block_K, block_M), dtype)
            xt_local = T.alloc_fragment((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            dt_shared = T.alloc_shared((block_K,), accum_dtype)
            dA_cumsum_shared = T.alloc_shared((block_K,), accum_dtype)
            scale = T.alloc_fragment((block_K,), accum_dtype)
            dA_cs_last = T.alloc_local((1,), accum_dtype)
            acc_o = T.alloc_fragment((block_M, block_N), accum_dtype)

            batch_idx = by % batch
            chunk_idx = by // batch
            m_idx = bx // T.ceildiv(dstate, block_N)
            n_idx = bx % T.ceildiv(dstate, block_N)

            dA_cs_last[0] = dA_cumsum[batch_idx, bz, chunk_idx, chunk_size - 1]
            T.clear(acc_o)
            for k in T.Pipelined(T.ceildiv(chunk_size, block_K), num_stages=num_stages):
                T.copy(
                    x[
                        batch_idx,
                        chunk_idx * chunk_size + k * block_K : chunk_idx * chunk_size + (k + 1) * block_K,
                        bz,
                        m_idx * block_M : (m_idx + 1) * block_M,
                    ],
                    x_shared,
                )
                T.copy(dA_cumsum[batch_idx, bz, chunk_idx, k * block_K : (k + 1) * block_K], dA_cumsum_shared)
                T.copy(dt[batch_idx, bz, chunk_idx, k * block_K : (k + 1) * block_K], dt_shared)
                for i in T.Parallel(block_K):
                    scale[i] = T.exp2(dA_cs_last[0] * p - dA_cumsum_shared[i] * p) * dt_shared[i]
                T.copy(x_shared, x_local)
                for i, j in T.Parallel(block_M, block_K):
                    xt_local[i, j] = x_local[j, i] * scale[j]
                T.copy(
                    B[
                        batch_idx,
                        chunk_idx * chunk_size + k * block_K : chunk_idx * chunk_size + (k + 1) * block_K,
                        bz // heads_per_group,
                        n_idx * block_N : (n_idx + 1) * block_N,
                    ],
                    B_shared,
                )
                T.gemm(xt_local, B_shared, acc_o)
            T.copy(
                acc_o,
                Output[
                    batch_idx,
                    chunk_idx,
                    bz,
                    m_idx * block_M : (m_idx + 1) * block_M,
                    n_idx * block_N : (n_idx + 1) * block_N,
                ],
            )

    @T.prim_func
    def chunk_scan(
        cb: T.Tensor((batch, nchunks, ngroups, chunk_size, chunk_size), dtype),  # type: ignore[valid-type]
        x: T.Tensor((batch, seqlen, nheads, headdim), dtype),  # type: ignore[valid-type]
        dt: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),  # type: ignore[valid-type]
        dA_cumsum: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),  # type: ignore[valid-type]
        C: T.Tensor((batch, seqlen, ngroups, dstate), dtype),  # type: ignore[valid-type]
        prev_states: T.Tensor((batch, nchunks, nheads, headdim, dstate), accum_dtype),  # type: ignore[valid-type]
        D: T.Tensor((nheads,), accum_dtype),  # type: ignore[valid-type]
        Output: T.Tensor((batch, seqlen, nheads, headdim), dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(
            nheads,
            T.ceildiv(chunk_size, block_M) * T.ceildiv(headdim, block_N),
            batch * nchunks,
            threads=threads,
        ) as (bz, bx, by):
            acc_o = T.alloc_fragment((block_M, block_N), accum_dtype)
            cb_shared = T.alloc_shared((block_M, block_K), dtype)
            cb_local = T.alloc_fragment((block_M, block_K), accum_dtype)
            cb_cast = T.alloc_fragment((block_M, block_K), dtype)
            dA_cs_k_shared = T.alloc_shared((block_K,), accum_dtype)
            dA_cs_m_local = T.alloc_fragment((block_M,), accum_dtype)
            dt_shared = T.alloc_shared((block_K,), accum_dtype)
            x_shared = T.alloc_shared((block_K, block_N), dtype)
            scale_m_local = T.alloc_fragment((block_M,), accum_dtype)
            C_shared = T.alloc_shared((block_M, dstate), dtype)
            prev_state_shared = T.alloc_shared((block_N, dstate), dtype)
            x_residual = T.alloc_fragment((block_M, block_N), accum_dtype)
            D_local = T.alloc_local((1,), accum_dtype)

            batch_idx = by % batch
            chunk_idx = by // batch
            m_idx = bx // T.ceildiv(headdim, block_N)
            n_idx = bx % T.ceildiv(headdim, block_N)
            row0 = chunk_idx * chunk_size + m_idx * block_M  # first sequence row of this block

            # Inter-chunk term: the state entering the chunk, decayed to each row.
            T.copy(
                dA_cumsum[batch_idx, bz, chunk_idx, m_idx * block_M : (m_idx + 1) * block_M], dA_cs_m_local
            )
            for i in T.Parallel(block_M):
                scale_m_local[i] = T.exp2(dA_cs_m_local[i] * p)
            T.copy(C[batch_idx, row0 : row0 + block_M, bz // heads_per_group, :], C_shared)
            T.copy(
                prev_states[batch_idx, chunk_idx, bz, n_idx * block_N : (n_idx + 1) * block_N, :],
                prev_state_shared,
            )
            T.gemm(C_shared, prev_state_shared, acc_o, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(block_M, block_N):
                acc_o[i, j] *= scale_m_local[i]

            # Intra-chunk term: causal (C . B) weights times decay and dt, applied to x.
            for k in T.Pipelined(T.ceildiv((m_idx + 1) * block_M, block_K), num_stages=num_stages):
                T.copy(
                    cb[
                        batch_idx,
                        chunk_idx,
                        bz // heads_per_group,
                        m_idx * block_M : (m_idx + 1) * block_M,
                        k * block_K : (k + 1) * block_K,
                    ],
                    cb_shared,
                )
                T.copy(cb_shared, cb_local)
                T.copy(dA_cumsum[batch_idx, bz, chunk_idx, k * block_K : (k + 1) * block_K], dA_cs_k_shared)
                T.copy(dt[batch_idx, bz, chunk_idx, k * block_K : (k + 1) * block_K], dt_shared)
                for i, j in T.Parallel(block_M, block_K):
                    cb_local[i, j] = T.if_then_else(
                        m_idx * block_M + i >= k * block_K + j,
                        cb_local[i, j] * T.exp2(dA_cs_m_local[i] * p - dA_cs_k_shared[j] * p) * dt_shared[j],
                        0,
                    )
                T.copy(cb_local, cb_cast)
                T.copy(
                    x[
                        batch_idx,
                        chunk_idx * chunk_size + k * block_K : chunk_idx * chunk_size + (k + 1) * block_K,
                        bz,
                        n_idx * block_N : (n_idx + 1) * block_N,
                    ],
                    x_shared,
                )
                T.gemm(cb_cast, x_shared, acc_o)

            # Skip connection D * x.
            D_local[0] = D[bz]
            T.copy(
                x[batch_idx, row0 : row0 + block_M, bz, n_idx * block_N : (n_idx + 1) * block_N], x_residual
            )
            for i, j in T.Parallel(block_M, block_N):
                acc_o[i, j] += x_residual[i, j] * D_local[0]
            T.copy(
                acc_o, Output[batch_idx, row0 : row0 + block_M, bz, n_idx * block_N : (n_idx + 1) * block_N]
            )

    return chunk_state if part == "state" else chunk_scan


chunk_state_kernel = functools.partial(ssd_kernel, "state")
"""``(B, x, dt, dA_cumsum) -> states`` (``ssd_kernel``'s arguments after ``part``)."""
chunk_scan_kernel = functools.partial(ssd_kernel, "scan")
"""``(cb, x, dt, dA_cumsum, C, prev_states, D) -> Output`` (``ssd_kernel``'s arguments after ``part``)."""


def _dims(x: Any, B: Any, dt: Any) -> tuple[int, int, int, int, int, int, int]:
    batch, seqlen, nheads, headdim = (int(s) for s in x.shape)
    ngroups, dstate = int(B.shape[2]), int(B.shape[3])
    chunk_size = int(dt.shape[3])
    return batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate


@functools.cache
def _compiled(factory: Any, dims: tuple[int, ...], dtype: str, block: int, target: str) -> Any:
    batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate = dims
    block_K = min(block, chunk_size)
    func = factory(
        batch,
        nheads,
        ngroups,
        seqlen,
        chunk_size,
        headdim,
        dstate,
        dtype,
        block_M=min(block, chunk_size),
        block_N=block,
        block_K=block_K,
    )
    return tilelang.compile(func, out_idx=[-1], target=target)


def chunk_state(B: Any, x: Any, dt: Any, dA_cumsum: Any, block: int = 64, target: str = "auto") -> Any:
    """Per-chunk SSD states (batch, nchunks, nheads, headdim, dstate), float32."""
    return _compiled(chunk_state_kernel, _dims(x, B, dt), dtype_name(x), block, target_key(target))(
        B, x, dt, dA_cumsum
    )


def chunk_scan(
    cb: Any,
    x: Any,
    dt: Any,
    dA_cumsum: Any,
    C: Any,
    prev_states: Any,
    D: Any,
    block: int = 64,
    target: str = "auto",
) -> Any:
    """SSD outputs (batch, seqlen, nheads, headdim) in x's dtype, given the states entering each chunk."""
    kernel = _compiled(chunk_scan_kernel, _dims(x, C, dt), dtype_name(x), block, target_key(target))
    return kernel(cb, x, dt, dA_cumsum, C, prev_states, D)
