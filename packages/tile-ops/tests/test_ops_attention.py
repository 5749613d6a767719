"""tile.ops.attention.flash_attention against a direct numpy softmax(QK^T)V."""

import numpy as np
import pytest

from tile.ops.attention import flash_attention


def _attention_ref(q, k, v, causal):
    q, k, v = (x.astype("float64").transpose(0, 2, 1, 3) for x in (q, k, v))  # (b, h, s, d)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        s = scores.shape[-1]
        scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape,block",
    [((1, 64, 2, 16), 32), ((2, 37, 1, 16), 16)],  # whole blocks; a 5-row tail
    ids=["multiple", "tail"],
)
def test_flash_attention_float32(shape, block, causal):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype("float32") for _ in range(3))
    out = flash_attention(q, k, v, causal=causal, block=block, target="cpu")
    np.testing.assert_allclose(out, _attention_ref(q, k, v, causal), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_M,block_N", [(32, 16), (64, 16)])
def test_flash_attention_causal_query_blocks_taller_than_key_blocks(block_M, block_N):
    # Some key blocks mask whole rows of a query block; those rows must keep their running
    # max (found on an H100 with 128x64 tiles: NaN rows)
    import tile.lang as tilelang
    from tile.ops.attention import flash_attention_kernel

    b, s, h, d = 1, 64, 2, 16
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype("float32") for _ in range(3))
    kernel = tilelang.compile(
        flash_attention_kernel(b, h, s, d, True, dtype="float32", block_M=block_M, block_N=block_N),
        out_idx=[-1], target="cpu",
    )
    np.testing.assert_allclose(kernel(q, k, v), _attention_ref(q, k, v, True), rtol=1e-5, atol=1e-5)


def test_flash_attention_float16_causal_differs_from_full():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 48, 2, 32)).astype("float16") for _ in range(3))
    causal = flash_attention(q, k, v, causal=True, block=16, target="cpu").astype("float64")
    np.testing.assert_allclose(causal, _attention_ref(q, k, v, True), rtol=1e-2, atol=5e-3)
    # The first query row attends only to the first key.
    np.testing.assert_allclose(causal[:, 0], v[:, 0].astype("float64"), atol=1e-3)
    assert not np.allclose(causal, _attention_ref(q, k, v, False), atol=1e-2)


def test_flash_attention_rejects_mismatched_shapes():
    q = np.zeros((1, 8, 1, 16), "float32")
    with pytest.raises(ValueError, match="one"):
        flash_attention(q, q, np.zeros((1, 9, 1, 16), "float32"))


def test_attention_config_keeps_the_backward_within_shared_memory():
    # gfx90a-like: 64 KiB of LDS, no async copies. 64-row float32 tiles of dim 32 made the
    # dK/dV kernel 67584 bytes as generated (Q, dO, K, V tiles, two staged probability
    # tiles, padded LSE/Delta rows): the config halves them; 16-bit tiles of 64 rows fit
    from tile.ir.backend import Capabilities
    from tile.ops._src.configs import attention_config, attention_shared_bytes

    lds = Capabilities(
        64, 1024, 64 * 1024, frozenset({"float32", "float16"}), 128, True, mma_shapes=((16, 16, 16),)
    )
    assert attention_shared_bytes(64, 64, 32, 4, 1) == 67584
    wide = attention_config(lds, 40, 40, 32, "float32")
    assert (wide.block_M, wide.block_N) == (32, 32)
    assert attention_shared_bytes(32, 32, 32, 4, 1) <= lds.shared_bytes
    half = attention_config(lds, 40, 40, 32, "float16")
    assert (half.block_M, half.block_N) == (64, 64)


def test_the_fused_backward_is_for_single_thread_blocks_with_whole_heads_in_cache():
    # a CPU-like target (one thread per block, 2 cores, 2 MiB of L2) gets the one-kernel
    # backward when every core has two blocks and a block's dQ fits in half its L2, splitting
    # a KV head's query heads over blocks for that; a GPU-like one (thread binding) never does
    from tile.ir.backend import Capabilities
    from tile.ops._src.configs import Tiling, attention_bwd_fused

    cpu = Capabilities(
        1, 1024, 1 << 24, frozenset({"float32"}), 512, True, thread_binding=False, compute_units=2,
        cache_bytes=(48 << 10, 2 << 20, 32 << 20),
    )
    cfg = Tiling(64, 64, num_stages=1, threads=128)
    assert attention_bwd_fused(cpu, cfg, blocks=8, groups=1, seq_q=1024, dim=64) == 1  # 256 KiB of dQ
    assert attention_bwd_fused(cpu, cfg, blocks=4, groups=1, seq_q=4096, dim=64) == 1  # 1 MiB
    assert not attention_bwd_fused(cpu, cfg, blocks=3, groups=1, seq_q=1024, dim=64)  # a core idles
    # a KV head's query heads split over blocks: 2 MiB of dQ per KV head is 1 MiB in each of two
    assert attention_bwd_fused(cpu, cfg, blocks=4, groups=2, seq_q=4096, dim=64) == 2
    # MQA, one batch: one KV head, 8 query heads over 4 blocks (two per core), 512 KiB of dQ each
    assert attention_bwd_fused(cpu, cfg, blocks=1, groups=8, seq_q=1024, dim=64) == 4
    assert not attention_bwd_fused(cpu, cfg, blocks=1, groups=3, seq_q=1024, dim=64)  # 3 blocks: no
    gpu = Capabilities(
        32, 1024, 228 << 10, frozenset({"float32"}), 128, True, thread_binding=True, compute_units=1,
        cache_bytes=(256 << 10, 50 << 20),
    )
    assert not attention_bwd_fused(gpu, cfg, blocks=64, groups=1, seq_q=128, dim=64)
