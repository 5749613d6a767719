"""The paper's kernels over random sizes: FlashAttention, MLA decode, dequantized GEMM, SSD.

The kernel programs are tile-ops' (the paper's programs written in tile.lang); the
references are this suite's own numpy code. Compile-time sizes are drawn from small sets
(every distinct size compiles once per run); data and seeds vary freely.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tile.conformance import reference as ref
from tile.conformance import strategies as ts
from tile.ops import attention, mla, ssd
from tile.ops import dequant_gemm as dequant

FLOATS = ("float32", "float16")


@given(batch_heads=st.sampled_from([(1, 1), (2, 2)]), seq=st.sampled_from([16, 37]),
       dim=st.sampled_from([16]), causal=st.booleans(), block=st.sampled_from([16]),
       seed=st.integers(0, 2**16), data=st.data())
def test_flash_attention(tile_backend, batch_heads, seq, dim, causal, block, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, FLOATS), label="dtype")
    batch, heads = batch_heads
    kernel = tile_backend.build(attention.flash_attention_kernel, batch, heads, seq, dim, causal, dtype,
                                block_M=block, block_N=block, out_idx=(-1,))
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((batch, seq, heads, dim)).astype(dtype) for _ in range(3))
    out = kernel(q, k, v)
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (1e-2, 1e-2)
    expected = ref.softmax_attention(q, k, v, causal)
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=rtol, atol=atol)


@given(shape=st.sampled_from([(16, 1, 16, 32), (32, 2, 8, 45)]), seed=st.integers(0, 2**16), data=st.data())
def test_mla_decode(tile_backend, shape, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, FLOATS), label="dtype")
    heads, kv_heads, block_H, seqlen = shape
    dim, pe_dim = 32, 16
    kernel = tile_backend.build(mla.flash_mla_decode_kernel, 1, heads, kv_heads, seqlen, dim, pe_dim,
                                block_N=16, block_H=block_H, dtype=dtype, out_idx=(-1,))
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, heads, dim)).astype(dtype)
    q_pe = rng.standard_normal((1, heads, pe_dim)).astype(dtype)
    kv = rng.standard_normal((1, seqlen, kv_heads, dim)).astype(dtype)
    k_pe = rng.standard_normal((1, seqlen, kv_heads, pe_dim)).astype(dtype)
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (1e-2, 1e-2)
    expected = ref.mla_decode(q, q_pe, kv, k_pe)
    np.testing.assert_allclose(kernel(q, q_pe, kv, k_pe).astype(np.float64), expected, rtol=rtol, atol=atol)


@given(fmt=st.sampled_from(["fp4", "int4"]), mnk=st.sampled_from([(16, 32, 64), (37, 19, 128)]),
       seed=st.integers(0, 2**16), data=st.data())
def test_dequantized_gemm(tile_backend, fmt, mnk, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, FLOATS), label="dtype")
    M, N, K = mnk
    group = 32
    kernel = tile_backend.build(dequant.dequant_gemm_kernel, M, N, K, fmt, dtype, dtype, group_size=group,
                                block_M=16, block_N=16, block_K=64, out_idx=(-1,))
    rng = np.random.default_rng(seed)
    a = ref.random_array(rng, (M, K), dtype)
    packed = rng.integers(0, 256, size=(N, K // 2)).astype(np.uint8)
    scale = (rng.random((N, K // group)) + 0.5).astype(dtype) if fmt == "int4" else None
    # the kernel dequantizes into ``dtype`` before its fp32-accumulated GEMM
    weights = ref.unpack_4bit(packed, fmt, scale, group).astype(ref.np_dtype(dtype)).astype(np.float64)
    ct = kernel(a, packed) if scale is None else kernel(a, packed, scale)
    expected = weights @ a.astype(np.float64).T
    ref.assert_close(ct, expected, dtype, accumulate=K, magnitude=12.0)


@given(dims=st.sampled_from([(1, 2, 1, 32, 16, 16, 16), (2, 2, 2, 64, 32, 16, 8)]),
       seed=st.integers(0, 2**16), data=st.data())
def test_linear_attention_chunk_state(tile_backend, dims, seed, data) -> None:
    """Mamba-2 (SSD) chunk_state: the per-chunk states of a linear-attention recurrence."""
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, FLOATS), label="dtype")
    batch, nheads, ngroups, seqlen, chunk, headdim, dstate = dims
    kernel = tile_backend.build(ssd.chunk_state_kernel, *dims, dtype, block_M=16, block_N=16, block_K=16,
                                out_idx=(-1,))
    rng = np.random.default_rng(seed)
    nchunks = seqlen // chunk
    x = rng.standard_normal((batch, seqlen, nheads, headdim)).astype(dtype)
    B = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype(dtype)
    dt = (rng.random((batch, nheads, nchunks, chunk)) * 0.2 + 0.01).astype(np.float32)
    A = -(rng.random(nheads) + 0.5).astype(np.float32)
    dA = np.cumsum(dt * A[None, :, None, None], axis=-1).astype(np.float32)
    out = kernel(B, x, dt, dA)
    heads_group = np.arange(nheads) // (nheads // ngroups)
    xc = x.astype(np.float64).reshape(batch, nchunks, chunk, nheads, headdim)
    Bc = B.astype(np.float64).reshape(batch, nchunks, chunk, ngroups, dstate)[:, :, :, heads_group]
    weight = np.exp(dA[..., -1:].astype(np.float64) - dA) * dt
    expected = np.einsum("bhcs,bcshp,bcshn->bchpn", weight, xc, Bc)
    ref.assert_close(out, expected, dtype, accumulate=chunk, magnitude=10.0)
