"""Mamba-2 SSD ``chunk_scan`` in TileLang, unchanged except for the two import lines.

The outputs of each chunk: the state entering the chunk decayed to each row,
``exp(dA_cumsum[l]) * C[l] prev_state^T``, plus the causal intra-chunk term
``sum_{s<=l} cb[l, s] * exp(dA_cumsum[l] - dA_cumsum[s]) * dt[s] * x[s]`` (with
``cb = C B^T`` per chunk) and the skip ``D * x[l]``. Checked against numpy.

Run: python examples/mamba2_chunk_scan.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def chunk_scan_fwd(
    batch,
    nheads,
    ngroups,
    seqlen,
    chunk_size,
    headdim,
    dstate,
    block_M=64,
    block_N=64,
    block_K=64,
    num_stages=2,
    threads=128,
):
    dtype = "float16"
    accum_dtype = "float"
    nchunks = seqlen // chunk_size
    heads_per_group = nheads // ngroups
    p = 1.44269504  # log2(e): the kernel uses exp2

    @T.prim_func
    def main(
        cb: T.Tensor((batch, nchunks, ngroups, chunk_size, chunk_size), dtype),
        x: T.Tensor((batch, seqlen, nheads, headdim), dtype),
        dt: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),
        dA_cumsum: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),
        C: T.Tensor((batch, seqlen, ngroups, dstate), dtype),
        prev_states: T.Tensor((batch, nchunks, nheads, headdim, dstate), accum_dtype),
        D: T.Tensor((nheads,), accum_dtype),
        Output: T.Tensor((batch, seqlen, nheads, headdim), dtype),
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

    return main


def reference(C, B, x, dt, dA_cumsum, prev_states, D):
    batch, _, nheads, headdim = x.shape
    _, _, ngroups, dstate = C.shape
    nchunks, chunk_size = dt.shape[2:]
    group = np.arange(nheads) // (nheads // ngroups)
    xc = x.astype("float64").reshape(batch, nchunks, chunk_size, nheads, headdim)
    Cc = C.astype("float64").reshape(batch, nchunks, chunk_size, ngroups, dstate)[:, :, :, group]
    Bc = B.astype("float64").reshape(batch, nchunks, chunk_size, ngroups, dstate)[:, :, :, group]
    dA = dA_cumsum.astype("float64")
    inter = np.einsum("bclhn,bchpn->bclhp", Cc, prev_states) * np.exp(dA).transpose(0, 2, 3, 1)[..., None]
    causal = np.tril(np.ones((chunk_size, chunk_size), bool))
    decay = np.where(causal, np.exp(dA[..., :, None] - dA[..., None, :]), 0) * dt[..., None, :]
    weights = np.einsum("bclhn,bcshn->bhcls", Cc, Bc) * decay
    intra = np.einsum("bhcls,bcshp->bclhp", weights, xc)
    return (inter + intra).reshape(x.shape) + D[:, None] * x.astype("float64")


if __name__ == "__main__":
    batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate = 2, 8, 2, 512, 64, 64, 64
    rng = np.random.default_rng(0)
    nchunks = seqlen // chunk_size
    x = rng.standard_normal((batch, seqlen, nheads, headdim)).astype("float16")
    B = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype("float16")
    C = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype("float16")
    dt = (rng.random((batch, nheads, nchunks, chunk_size)) * 0.1 + 0.01).astype("float32")
    A = -(rng.random(nheads) + 0.5).astype("float32")
    dA_cumsum = np.cumsum(dt * A[None, :, None, None], axis=-1).astype("float32")
    prev_states = rng.standard_normal((batch, nchunks, nheads, headdim, dstate)).astype("float32")
    D = rng.standard_normal(nheads).astype("float32")
    Cc = C.astype("float32").reshape(batch, nchunks, chunk_size, ngroups, dstate)
    Bc = B.astype("float32").reshape(batch, nchunks, chunk_size, ngroups, dstate)
    cb = np.ascontiguousarray(np.einsum("bclgn,bcsgn->bcgls", Cc, Bc)).astype("float16")

    kernel = chunk_scan_fwd(batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate)
    out = kernel(cb, x, dt, dA_cumsum, C, prev_states, D)
    ref = reference(C, B, x, dt, dA_cumsum, prev_states, D)
    np.testing.assert_allclose(out.astype("float64"), ref, rtol=2e-2, atol=5e-2)
    print("mamba2_chunk_scan: OK")
