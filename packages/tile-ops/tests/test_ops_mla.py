"""tile.ops.mla.flash_mla_decode against a direct numpy MLA decode step."""

import numpy as np
import pytest

from tile.ops.mla import flash_mla_decode


def _mla_ref(q, q_pe, kv, k_pe):
    group = q.shape[1] // kv.shape[2]
    kv = np.repeat(kv.astype("float64"), group, axis=2)
    k_pe = np.repeat(k_pe.astype("float64"), group, axis=2)
    scores = np.einsum("bhd,bshd->bhs", q.astype("float64"), kv) + np.einsum(
        "bhp,bshp->bhs", q_pe.astype("float64"), k_pe
    )
    scores /= np.sqrt(q.shape[-1] + q_pe.shape[-1])
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("bhs,bshd->bhd", p / p.sum(axis=-1, keepdims=True), kv)


def _inputs(batch, heads, kv_heads, seqlen, dim, pe_dim, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((batch, heads, dim)).astype(dtype),
        rng.standard_normal((batch, heads, pe_dim)).astype(dtype),
        rng.standard_normal((batch, seqlen, kv_heads, dim)).astype(dtype),
        rng.standard_normal((batch, seqlen, kv_heads, pe_dim)).astype(dtype),
    )


@pytest.mark.parametrize(
    "heads,kv_heads,seqlen,block_H",
    [(16, 1, 64, 16), (32, 2, 77, 8)],  # one KV head, whole blocks; two KV groups, tail
    ids=["mqa", "grouped-tail"],
)
def test_flash_mla_decode_float32(heads, kv_heads, seqlen, block_H):
    args = _inputs(2, heads, kv_heads, seqlen, 32, 16, "float32")
    out = flash_mla_decode(*args, block_N=32, block_H=block_H, target="cpu")
    np.testing.assert_allclose(out, _mla_ref(*args), rtol=1e-5, atol=1e-5)


def test_flash_mla_decode_float16_uses_the_rotary_part():
    q, q_pe, kv, k_pe = _inputs(1, 16, 1, 48, 32, 16, "float16", seed=3)
    out = flash_mla_decode(q, q_pe, kv, k_pe, block_N=16, block_H=16, target="cpu").astype("float64")
    np.testing.assert_allclose(out, _mla_ref(q, q_pe, kv, k_pe), rtol=1e-2, atol=5e-3)
    without_pe = _mla_ref(q, np.zeros_like(q_pe), kv, k_pe)
    assert not np.allclose(out, without_pe, atol=1e-2)


def test_flash_mla_decode_rejects_mismatched_shapes():
    q, q_pe, kv, k_pe = _inputs(1, 16, 1, 8, 32, 16, "float32")
    with pytest.raises(ValueError, match="shapes"):
        flash_mla_decode(q, q_pe, kv, k_pe[:, :, :, :8])


@pytest.mark.parametrize("heads,kv_heads", [(8, 2), (4, 4)])
def test_mla_decode_pads_blocks_of_few_heads(heads, kv_heads):
    # fewer heads per KV head than one matrix instruction's 16 rows: the block's tile is
    # padded, the padded rows (other heads' queries, or none) are never stored
    from tile.ops._src import run

    rng = np.random.default_rng(3)
    shapes = ((2, heads, 32), (2, heads, 16), (2, 19, kv_heads, 32), (2, 19, kv_heads, 16))
    q, q_pe, kv, k_pe = (rng.standard_normal(s).astype("float32") for s in shapes)
    got = run.mla_decode_forward(q, q_pe, kv, k_pe, "cpu")
    np.testing.assert_allclose(got, _mla_ref(q, q_pe, kv, k_pe), rtol=1e-5, atol=1e-5)
