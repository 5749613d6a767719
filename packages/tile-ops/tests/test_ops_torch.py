"""``torch.ops.tile.*``: every op passes ``torch.library.opcheck`` (schema, fake kernel, autograd
registration, AOT dispatch with dynamic shapes), every backward passes ``gradcheck`` in float64
on the CPU backend (the kernels run in float64 there: float64 tiles, float64 accumulation),
and the public functions route torch tensors through the custom ops.

Shapes are tiny and shared between tests so each kernel compiles once (the CPU compiler is slow).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.library import opcheck  # noqa: E402

import tile.ops  # noqa: E402
import tile.ops.quant  # noqa: E402
from tile.ops import OpArgumentError  # noqa: E402

F64 = torch.float64


def _t(*shape, dtype=F64, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad)


# (q heads, kv heads, seq_q, seq_kv): GQA with query tails; MQA with more keys than queries
ATTENTION_SHAPES = {"gqa": (4, 2, 9, 9), "mqa": (2, 1, 5, 11)}


def _qkv(heads, kv_heads, seq_q, seq_kv, dim=8, dtype=F64):
    return (
        _t(1, heads, seq_q, dim, dtype=dtype, seed=1),
        _t(1, kv_heads, seq_kv, dim, dtype=dtype, seed=2),
        _t(1, kv_heads, seq_kv, dim, dtype=dtype, seed=3),
    )


@pytest.mark.parametrize(
    "shape,causal",
    [(ATTENTION_SHAPES["gqa"], False), (ATTENTION_SHAPES["gqa"], True), (ATTENTION_SHAPES["mqa"], True)],
    ids=["gqa", "gqa-causal", "mqa-causal"],
)
def test_flash_attention_gradcheck_and_opcheck(shape, causal):
    q, k, v = _qkv(*shape)
    assert torch.autograd.gradcheck(lambda q, k, v: tile.ops.flash_attention(q, k, v, causal), (q, k, v))
    opcheck(torch.ops.tile._flash_attention_fwd, (q, k, v, causal, None))
    opcheck(torch.ops.tile.flash_attention, (q, k, v, causal, None))


@pytest.mark.parametrize("fused", [1, 2, 0], ids=["one-kernel", "one-kernel-heads-split", "split"])
@pytest.mark.parametrize(
    "shape,causal",
    [(ATTENTION_SHAPES["gqa"], True), (ATTENTION_SHAPES["mqa"], False)],
    ids=["gqa-causal", "mqa"],
)
def test_both_flash_attention_backwards_pass_gradcheck(monkeypatch, shape, causal, fused):
    """The backward as one kernel of whole heads per block (``flash_bwd_fused_kernel``, what
    the CPU picks for enough heads), as one kernel with each KV head's query heads split over
    two blocks (what it picks for MQA with one batch; dK and dV summed over the blocks), and
    as the dK/dV and dQ kernels, whatever this machine's core count would pick."""
    from tile.ops._src import run

    monkeypatch.setattr(run, "attention_bwd_fused", lambda *args: fused)
    q, k, v = _qkv(*shape)
    assert torch.autograd.gradcheck(lambda q, k, v: tile.ops.flash_attention(q, k, v, causal), (q, k, v))


def test_flash_attention_matches_sdpa_and_its_gradients():
    q, k, v = _qkv(*ATTENTION_SHAPES["gqa"])
    out = tile.ops.flash_attention(q, k, v, True)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out, ref)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(ref, (q, k, v), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_norm_and_softmax_gradcheck_and_opcheck():
    x, w, b = _t(2, 3, 8, seed=4), _t(8, seed=5), _t(8, seed=6)
    assert torch.autograd.gradcheck(lambda x, w: tile.ops.rms_norm(x, w, 1e-5), (x, w))
    assert torch.autograd.gradcheck(lambda x, w, b: tile.ops.layer_norm(x, w, b, 1e-5), (x, w, b))
    assert torch.autograd.gradcheck(lambda x: tile.ops.softmax(x, -1), (x,))
    for op, args in [
        (torch.ops.tile._rms_norm_fwd, (x, w, 1e-5)),
        (torch.ops.tile.rms_norm, (x, w, 1e-5)),
        (torch.ops.tile._layer_norm_fwd, (x, w, b, 1e-5)),
        (torch.ops.tile.layer_norm, (x, w, b, 1e-5)),
        (torch.ops.tile.softmax, (x, -1)),
    ]:
        opcheck(op, args)
    torch.testing.assert_close(
        tile.ops.layer_norm(x, w, b, 1e-5), torch.nn.functional.layer_norm(x, (8,), w, b, 1e-5)
    )
    torch.testing.assert_close(tile.ops.rms_norm(x, w, 1e-5), torch.nn.functional.rms_norm(x, (8,), w, 1e-5))


def test_matmul_gradcheck_and_opcheck():
    a, b = _t(2, 5, 7, seed=7), _t(7, 3, seed=8)
    assert torch.autograd.gradcheck(tile.ops.matmul, (a, b))
    opcheck(torch.ops.tile.matmul, (a, b))
    torch.testing.assert_close(tile.ops.matmul(a, b), a @ b)


def test_forward_only_ops_pass_opcheck():
    f32 = torch.float32
    q, k, v = (t.detach() for t in _qkv(4, 2, 2, 70, dim=16, dtype=f32))
    opcheck(torch.ops.tile.flash_decode, (q, k, v, True, None))
    np.testing.assert_allclose(
        torch.ops.tile.flash_decode(q, k, v).numpy(),
        tile.ops.flash_decode(q.numpy(), k.numpy(), v.numpy()),
        rtol=1e-6,
        atol=1e-6,
    )
    mla = (
        _t(1, 16, 32, dtype=f32, grad=False),
        _t(1, 16, 8, dtype=f32, grad=False),
        _t(1, 40, 1, 32, dtype=f32, grad=False),
        _t(1, 40, 1, 8, dtype=f32, grad=False),
    )
    opcheck(torch.ops.tile.mla_decode, mla)
    rng = np.random.default_rng(0)
    packed = torch.from_numpy(tile.ops.pack_codes(rng.integers(0, 16, (48, 128)), "int4"))
    scale, zeros = _t(48, 4, dtype=f32, grad=False), _t(48, 4, dtype=f32, grad=False)
    for rows in (1, 5):
        a = _t(rows, 128, dtype=f32, grad=False)
        opcheck(torch.ops.tile.dequant_matmul, (a, packed, scale, zeros, "int4", 32))
    x = _t(1, 64, 2, 16, dtype=f32, grad=False)
    B = _t(1, 64, 1, 16, dtype=f32, grad=False)
    dt = torch.rand(1, 2, 2, 32) * 0.1
    dA = torch.cumsum(-dt, -1)
    opcheck(torch.ops.tile.chunk_state, (B, x, dt, dA))
    cb = _t(1, 2, 1, 32, 32, dtype=f32, grad=False)
    prev = _t(1, 2, 2, 16, 16, dtype=f32, grad=False)
    opcheck(torch.ops.tile.chunk_scan, (cb, x, dt, dA, B, prev, _t(2, dtype=f32, grad=False)))


def test_torch_ops_take_the_functions_positional_arguments_and_any_strides():
    q, k, v = (t.detach() for t in _qkv(*ATTENTION_SHAPES["gqa"]))
    # a (batch, seq, heads, dim) tensor seen through transpose: not contiguous, still accepted
    q_t = q.transpose(1, 2).contiguous().transpose(1, 2)
    assert not q_t.is_contiguous()
    torch.testing.assert_close(
        torch.ops.tile.flash_attention(q_t, k, v, True, None), tile.ops.flash_attention(q, k, v, True)
    )


def test_torch_errors_are_typed_and_name_the_argument():
    with pytest.raises(OpArgumentError, match="'k'"):
        tile.ops.flash_attention(_t(1, 3, 4, 8), _t(1, 2, 4, 8), _t(1, 2, 4, 8))
    with pytest.raises(OpArgumentError, match="'weight'"):
        torch.ops.tile.rms_norm(_t(4, 8), _t(7), 1e-6)


def test_half_precision_attention_and_matmul_match_float32_references():
    # fp16 tiles with fp32 accumulation (the GPU configuration), forward and backward
    q, k, v = (t.detach().to(torch.float16).requires_grad_() for t in _qkv(*ATTENTION_SHAPES["gqa"]))
    out = tile.ops.flash_attention(q, k, v, True)
    assert out.dtype == torch.float16
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q32, k32, v32, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out.float(), ref, rtol=2e-3, atol=2e-3)
    grad = torch.randn_like(ref)
    got = torch.autograd.grad(out, (q, k, v), grad.half())
    want = torch.autograd.grad(ref, (q32, k32, v32), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.float(), w, rtol=1e-2, atol=1e-2)
    a, b = _t(16, 24, dtype=torch.bfloat16, grad=False), _t(24, 8, dtype=torch.bfloat16, grad=False)
    torch.testing.assert_close(tile.ops.matmul(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


class _RecordingOps:
    """Stands in for ``torch.ops.tile``: records which ops a call went through."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        op = getattr(torch.ops.tile, name)

        def call(*args):
            self.calls.append(name)
            return op(*args)

        return call


def _dequant_args(rows=1):
    rng = np.random.default_rng(1)
    packed = torch.from_numpy(tile.ops.pack_codes(rng.integers(0, 16, (40, 64)), "int4"))
    scale = torch.rand(40, 2) + 0.5
    return _t(rows, 64, dtype=torch.float32, grad=False), packed, scale


def test_plain_eager_dequant_matmul_skips_torch_dispatch_with_the_same_result(monkeypatch):
    from tile.ops._src import api

    a, packed, scale = _dequant_args()
    want = torch.ops.tile.dequant_matmul(a, packed, scale, None, "int4", 32)
    ops = _RecordingOps()
    monkeypatch.setattr(api, "_torch_ops", lambda: ops)
    got = tile.ops.dequant_matmul(a, packed, scale, None, "int4", 32)
    assert ops.calls == []
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    dense = tile.ops.dequantize_reference(packed.numpy(), "int4", scale.numpy(), None, 32)
    np.testing.assert_allclose(got.numpy(), a.numpy().astype(np.float64) @ dense.T, rtol=1e-5, atol=1e-4)
    with pytest.raises(OpArgumentError, match="'group_size'"):  # the same checks on either path
        tile.ops.dequant_matmul(a, packed, scale, None, "int4", 48)


def test_dequant_matmul_takes_the_op_wherever_torch_could_tell_the_difference(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from tile.ops._src import api

    ops = _RecordingOps()
    monkeypatch.setattr(api, "_torch_ops", lambda: ops)
    a, packed, scale = _dequant_args()
    # an activation that requires grad
    tile.ops.dequant_matmul(a.clone().requires_grad_(), packed, scale, None, "int4", 32)
    assert ops.calls == ["dequant_matmul"]
    # fake tensors (what torch.compile traces with): the op's fake implementation gives the shape
    with FakeTensorMode() as mode:
        fake = tile.ops.dequant_matmul(
            mode.from_tensor(a), mode.from_tensor(packed), mode.from_tensor(scale), None, "int4", 32
        )
    assert ops.calls == ["dequant_matmul"] * 2 and tuple(fake.shape) == (1, 40)
    # a traced function sees the op, with no graph break
    def decode(x):
        return tile.ops.dequant_matmul(x, packed, scale, None, "int4", 32)

    torch.testing.assert_close(torch.compile(decode, fullgraph=True)(a), decode(a))


def test_plain_eager_decoding_ops_skip_torch_dispatch_with_the_same_result(monkeypatch):
    from tile.ops._src import api

    f32 = torch.float32
    q, k, v = (t.detach() for t in _qkv(4, 2, 2, 70, dim=16, dtype=f32))
    mla = (
        _t(1, 16, 32, dtype=f32, grad=False),
        _t(1, 16, 8, dtype=f32, grad=False),
        _t(1, 40, 1, 32, dtype=f32, grad=False),
        _t(1, 40, 1, 8, dtype=f32, grad=False),
    )
    want = torch.ops.tile.flash_decode(q, k, v, True, None), torch.ops.tile.mla_decode(*mla)
    ops = _RecordingOps()
    monkeypatch.setattr(api, "_torch_ops", lambda: ops)
    got = tile.ops.flash_decode(q, k, v, causal=True), tile.ops.mla_decode(*mla)
    assert ops.calls == []
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    tile.ops.flash_decode(q.clone().requires_grad_(), k, v, causal=True)
    assert ops.calls == ["flash_decode"]
