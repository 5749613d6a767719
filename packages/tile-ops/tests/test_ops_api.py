"""``import tile.ops``: each op on numpy arrays against an independent numpy reference, and the
typed errors a bad argument gets before anything compiles."""

from __future__ import annotations

import numpy as np
import pytest

import tile.ops
import tile.ops.quant
from tile.ops import OpArgumentError


def attention_reference(q, k, v, causal=False, scale=None, bottom_right=False):
    """softmax(scale q k^T [mask]) v in float64, GQA by repeating k/v heads."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if causal:
        sq, sk = s.shape[-2:]
        offset = sk - sq if bottom_right else 0
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + offset, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _randn(*shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    "heads,kv_heads,seq_q,seq_kv,causal",
    [(4, 2, 37, 37, True), (2, 1, 20, 45, False)],
    ids=["gqa-tail-causal", "mqa-longer-kv"],
)
def test_flash_attention_sdpa_layout(heads, kv_heads, seq_q, seq_kv, causal):
    q = _randn(2, heads, seq_q, 16, seed=1)
    k, v = _randn(2, kv_heads, seq_kv, 16, seed=2), _randn(2, kv_heads, seq_kv, 16, seed=3)
    out = tile.ops.flash_attention(q, k, v, causal, 0.3)
    np.testing.assert_allclose(out, attention_reference(q, k, v, causal, 0.3), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_decode_splits_the_cache(causal):
    # 600 keys: several splits of 64-key tiles, the last one partial
    q, k, v = _randn(2, 8, 2, 32, seed=4), _randn(2, 2, 600, 32, seed=5), _randn(2, 2, 600, 32, seed=6)
    out = tile.ops.flash_decode(q, k, v, causal)
    ref = attention_reference(q, k, v, causal, bottom_right=True)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)


def test_norms_and_softmax_on_rows_of_any_rank():
    x, w, b = _randn(3, 5, 40, seed=7), _randn(40, seed=8), _randn(40, seed=9)
    x64 = x.astype(np.float64)
    rms = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(tile.ops.rms_norm(x, w, 1e-6), rms, rtol=1e-5, atol=1e-5)
    ln = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(tile.ops.layer_norm(x, w, b, 1e-5), ln, rtol=1e-5, atol=1e-5)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    np.testing.assert_allclose(tile.ops.softmax(x, -1), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_matmul_batched_rows_and_float64():
    a, b = _randn(2, 3, 20, dtype="float64", seed=10), _randn(20, 9, dtype="float64", seed=11)
    np.testing.assert_allclose(tile.ops.matmul(a, b), a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "fmt,zeros,m",
    [
        ("int4", True, 1),
        ("int2", False, 1),
        ("nf4", False, 1),
        ("fp4", False, 1),
        ("int4", True, 5),
        ("nf4", False, 5),
    ],
    ids=["int4-zeros-gemv", "int2-gemv", "nf4-gemv", "fp4-gemv", "int4-zeros-gemm", "nf4-gemm"],
)
def test_dequant_matmul_formats(fmt, zeros, m):
    n, k, group = 48, 128, 32
    rng = np.random.default_rng(12)
    codes = rng.integers(0, 1 << tile.ops.quant.BITS[fmt], size=(n, k))
    packed = tile.ops.pack_codes(codes, fmt)
    scale = (rng.random((n, k // group)) + 0.5).astype("float32")
    zero = rng.standard_normal((n, k // group)).astype("float32") if zeros else None
    a = rng.standard_normal((m, k)).astype("float32")
    out = tile.ops.dequant_matmul(a, packed, scale, zero, fmt, group)
    ref = a.astype(np.float64) @ tile.ops.dequantize_reference(packed, fmt, scale, zero, group).T
    assert out.shape == (m, n)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_dequant_reference_decodes_known_codes():
    # int4 two's complement, nf4 ends, fp4 E2M1, int2: hand-computed values
    assert tile.ops.quant.values("int4").tolist()[6:10] == [6.0, 7.0, -8.0, -7.0]
    assert tile.ops.quant.values("int2").tolist() == [0.0, 1.0, -2.0, -1.0]
    assert tile.ops.quant.values("nf4")[[0, 7, 15]].tolist() == [-1.0, 0.0, 1.0]
    assert tile.ops.quant.values("fp4")[[3, 7, 13]].tolist() == [1.5, 6.0, -3.0]
    packed = tile.ops.pack_codes(np.array([[1, 2, 3, 0]]), "int2")
    assert packed.tolist() == [[1 | 2 << 2 | 3 << 4]]


def test_mla_decode_matches_reference():
    q, q_pe = _randn(1, 16, 32, seed=13), _randn(1, 16, 8, seed=14)
    kv, k_pe = _randn(1, 40, 1, 32, seed=15), _randn(1, 40, 1, 8, seed=16)
    qf = np.concatenate([q, q_pe], -1)[:, :, None]  # (B, H, 1, D + P)
    kf = np.concatenate([kv, k_pe], -1).transpose(0, 2, 1, 3)  # (B, 1, S, D + P)
    ref = attention_reference(qf, kf, kv.transpose(0, 2, 1, 3))[:, :, 0]
    np.testing.assert_allclose(tile.ops.mla_decode(q, q_pe, kv, k_pe), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "call,argument",
    [
        (
            lambda: tile.ops.flash_attention(_randn(1, 3, 8, 16), _randn(1, 2, 8, 16), _randn(1, 2, 8, 16)),
            "'k'",
        ),
        (
            lambda: tile.ops.flash_attention(_randn(1, 8, 2, 16), _randn(1, 8, 2, 8), _randn(1, 8, 2, 8)),
            "'k'",
        ),
        (lambda: tile.ops.flash_attention(_randn(8, 16), _randn(8, 16), _randn(8, 16)), "'q'"),
        (
            lambda: tile.ops.flash_attention(
                _randn(1, 2, 8, 16), _randn(1, 2, 8, 16, dtype="float16"), _randn(1, 2, 8, 16)
            ),
            "'k'",
        ),
        (lambda: tile.ops.rms_norm(_randn(4, 8), _randn(7)), "'weight'"),
        (lambda: tile.ops.layer_norm(_randn(4, 8), _randn(8), _randn(8), eps=0.0), "'eps'"),
        (lambda: tile.ops.softmax(_randn(4, 8), dim=0), "'dim'"),
        (lambda: tile.ops.softmax(_randn(4, 8).astype("int32")), "'x'"),
        (lambda: tile.ops.matmul(_randn(4, 8), _randn(6, 3)), "'b'"),
        (lambda: tile.ops.matmul(_randn(8, 4).T, _randn(8, 3)), "'a'"),
        (
            lambda: tile.ops.dequant_matmul(
                _randn(1, 64), np.zeros((4, 32), "uint8"), fmt="int4", group_size=32
            ),
            "'scale'",
        ),
        (lambda: tile.ops.dequant_matmul(_randn(1, 64), np.zeros((4, 32), "uint8"), fmt="int3"), "'fmt'"),
        (
            lambda: tile.ops.dequant_matmul(
                _randn(1, 64),
                np.zeros((4, 32), "uint8"),
                _randn(4, 2),
                _randn(4, 2),
                fmt="nf4",
                group_size=32,
            ),
            "'zeros'",
        ),
    ],
    ids=[
        "heads-divide",
        "dim",
        "rank",
        "dtype",
        "weight",
        "eps",
        "dim-axis",
        "x-dtype",
        "inner",
        "strides",
        "scale",
        "fmt",
        "zeros",
    ],
)
def test_bad_arguments_get_typed_errors_naming_them(call, argument):
    with pytest.raises(OpArgumentError, match=argument) as info:
        call()
    assert info.value.hint and isinstance(info.value, ValueError)
    assert info.value.location is not None and info.value.location.filename.endswith("test_ops_api.py")



def _modules():
    import tile.ops.attention
    import tile.ops.dequant_gemm
    import tile.ops.gemm
    import tile.ops.gemv
    import tile.ops.norm

    return tile.ops


_r = _randn
_u8 = np.zeros((4, 30), "uint8")


@pytest.mark.parametrize(
    "call,argument",
    [
        # flash_decode: kv heads that do not divide q's; a non-contiguous numpy view
        (lambda: tile.ops.flash_decode(_r(1, 3, 1, 16), _r(1, 2, 40, 16), _r(1, 2, 40, 16)), "'k'"),
        (lambda: tile.ops.flash_decode(_r(1, 2, 16, 2).transpose(0, 1, 3, 2), _r(1, 2, 40, 16),
                                       _r(1, 2, 40, 16)), "'q'"),
        # mla_decode: kv of the wrong head dim; kv heads that do not divide
        (lambda: tile.ops.mla_decode(_r(1, 4, 32), _r(1, 4, 16), _r(1, 9, 1, 31), _r(1, 9, 1, 16)), "'kv'"),
        (lambda: tile.ops.mla_decode(_r(1, 4, 32), _r(1, 4, 16), _r(1, 9, 3, 32), _r(1, 9, 3, 16)), "'kv'"),
        # dequant_matmul: a group size that does not divide K; packed bytes of the wrong width
        (lambda: tile.ops.dequant_matmul(_r(1, 64), np.zeros((4, 32), "uint8"), _r(4, 2), fmt="int4",
                                         group_size=48), "'group_size'"),
        (lambda: tile.ops.dequant_matmul(_r(2, 64), _u8, _r(4, 2), fmt="int4", group_size=32), "'b_packed'"),
        # SSD: groups that do not divide the heads; chunks that do not divide the sequence
        (lambda: tile.ops.chunk_state(_r(1, 32, 3, 8), _r(1, 32, 4, 8), _r(1, 4, 2, 16), _r(1, 4, 2, 16)),
         "'B'"),
        (lambda: tile.ops.chunk_state(_r(1, 30, 2, 8), _r(1, 30, 4, 8), _r(1, 4, 2, 16), _r(1, 4, 2, 16)),
         "'dt'"),
        # the wrappers of the module-level kernels
        (lambda: _modules().norm.rms_norm(_r(4, 8), _r(7)), "'weight'"),
        (lambda: _modules().norm.softmax(_r(2, 4, 8)), "'x'"),
        (lambda: _modules().gemm.matmul(_r(4, 8), _r(6, 3)), "'b'"),
        (lambda: _modules().gemv.gemv(_r(1, 8), _r(6, 3)), "'w'"),
        (lambda: _modules().attention.flash_attention(_r(1, 8, 2, 16), _r(1, 8, 2, 8), _r(1, 8, 2, 8)),
         "'k'"),
        (lambda: _modules().dequant_gemm.dequant_matmul(_r(2, 64), _u8), "'b_packed'"),
    ],
    ids=["decode-heads", "decode-strides", "mla-dim", "mla-heads", "group", "packed", "ssd-groups",
         "ssd-chunk", "norm-weight", "norm-rank", "gemm-inner", "gemv-inner", "attention-shape",
         "dequant-packed"],
)
def test_more_bad_arguments_get_typed_errors_naming_them(call, argument):
    with pytest.raises(OpArgumentError, match=argument) as info:
        call()
    assert info.value.hint


def test_a_target_in_any_form_compile_takes():
    # a dict target (the form tile.lang.compile and the README use) raised "unhashable type:
    # 'dict'" in the ops' kernel caches
    import tile.ops.gemm
    import tile.ops.norm

    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 48)).astype(np.float32)
    for target in ({"kind": "cpu"}, "cpu"):
        np.testing.assert_allclose(tile.ops.matmul(a, b, target=target), a @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(tile.ops.gemm.matmul(a, b, target=target), a @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(
            tile.ops.norm.softmax(a, target=target), np.exp(a) / np.exp(a).sum(-1, keepdims=True), rtol=1e-5
        )


def test_ops_run_for_turing_on_the_emulator(monkeypatch):
    # sm_75 (T4): fp16 tensor cores through m16n8k8, 64 KB of shared memory for the configs
    pytest.importorskip("tile.backends.cuda")
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    turing = {"kind": "cuda", "arch": "sm_75"}
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(128, 64, generator=gen).half()
    b = torch.randn(64, 96, generator=gen).half()
    got = tile.ops.matmul(a, b, target=turing)
    torch.testing.assert_close(got.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)
    q, k, v = (torch.randn(1, 2, 128, 64, generator=gen).half() for _ in range(3))
    out = tile.ops.flash_attention(q, k, v, causal=True, target=turing)
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
