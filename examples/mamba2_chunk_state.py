"""Mamba-2 SSD ``chunk_state`` in TileLang, unchanged except for the two import lines.

For each chunk of ``chunk_size`` steps, the state the chunk produces starting from
zero: ``states[c, h] = sum_s exp(dA_cumsum[last] - dA_cumsum[s]) * dt[s] * x[s]^T B[s]``
(headdim x dstate per head). ``x`` is transposed and scaled in ``T.Parallel`` into a
fragment that is the A operand of ``T.gemm``. Checked against numpy.

Run: python examples/mamba2_chunk_state.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def chunk_state_fwd(
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
        B: T.Tensor((batch, seqlen, ngroups, dstate), dtype),
        x: T.Tensor((batch, seqlen, nheads, headdim), dtype),
        dt: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),
        dA_cumsum: T.Tensor((batch, nheads, nchunks, chunk_size), accum_dtype),
        Output: T.Tensor((batch, nchunks, nheads, headdim, dstate), accum_dtype),
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

    return main


def reference(B, x, dt, dA_cumsum):
    batch, _, nheads, headdim = x.shape
    _, _, ngroups, dstate = B.shape
    nchunks, chunk_size = dt.shape[2:]
    group = np.arange(nheads) // (nheads // ngroups)
    xc = x.astype("float64").reshape(batch, nchunks, chunk_size, nheads, headdim)
    Bc = B.astype("float64").reshape(batch, nchunks, chunk_size, ngroups, dstate)[:, :, :, group]
    weight = np.exp(dA_cumsum[..., -1:] - dA_cumsum) * dt  # (batch, nheads, nchunks, chunk_size)
    return np.einsum("bhcs,bcshp,bcshn->bchpn", weight, xc, Bc)


if __name__ == "__main__":
    batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate = 2, 8, 2, 512, 64, 64, 64
    rng = np.random.default_rng(0)
    nchunks = seqlen // chunk_size
    x = rng.standard_normal((batch, seqlen, nheads, headdim)).astype("float16")
    B = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype("float16")
    dt = (rng.random((batch, nheads, nchunks, chunk_size)) * 0.1 + 0.01).astype("float32")
    A = -(rng.random(nheads) + 0.5).astype("float32")
    dA_cumsum = np.cumsum(dt * A[None, :, None, None], axis=-1).astype("float32")

    kernel = chunk_state_fwd(batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate)
    states = kernel(B, x, dt, dA_cumsum)
    np.testing.assert_allclose(states, reference(B, x, dt, dA_cumsum), rtol=1e-2, atol=1e-2)
    print("mamba2_chunk_state: OK")
