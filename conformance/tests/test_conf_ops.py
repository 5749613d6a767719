"""tile-ops' kernels on every backend: each op's own launch path against this suite's numpy.

Every op of ``tile.ops`` runs here through the function that launches it
(``tile.ops._src.run``): the kernel programs it compiles, with the config it picks for
the backend under test from that backend's capabilities, on numpy arrays. So a backend
(or an emulated device) that miscompiles a kernel of the op library fails here, and so
does an op whose config does not fit a backend. The references are this file's own
float64 numpy: forward values and, for the differentiable ops, the gradients
(FlashAttention-2's dQ, dK, dV with grouped heads; the norms' dx, dweight, dbias;
softmax's dx).

Compile-time sizes come from small fixed sets (each compiles once per run); the data
and seeds vary. Under the emulator each distinct kernel is a C++ build (about ten minutes
for the family on a loaded 2-core machine), so there the hypothesis tests run in the
nightly profile only (``HYPOTHESIS_PROFILE=nightly pytest conformance/tests/test_conf_ops.py
--tile-backend=cuda --tile-device=emu``); CI runs them on the CPU backend. The attention
family (FlashAttention forward and backward, flash-decoding, MLA decoding) also has one
fixed case each that runs on every backend and device, the emulated GPUs in CI included
(``--tile-arch=sm_90a`` for Hopper's paths, ``--tile-backend=rocm`` for gfx90a's). So does
fp8 matmul, where the target computes with e4m3 (the CPU; CUDA from ``--tile-arch=sm_89``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tile.conformance import env as conformance_env
from tile.conformance import reference as ref
from tile.ops._src import run


@pytest.fixture(autouse=True)
def _nightly_under_the_emulator(request, tile_backend) -> None:
    # the dequant kernels run under the emulator in every profile: their per-row fragments
    # once read other threads' elements on sm_80 (issue 21) where the CPU's one thread was right
    if request.node.get_closest_marker("every_emulator_profile"):
        return
    nightly = conformance_env.HYPOTHESIS_PROFILE.get() == "nightly"
    if hasattr(request.function, "hypothesis") and tile_backend.device == "emu" and not nightly:
        pytest.skip("under the emulator the op library's hypothesis tests run in the nightly profile")


def _tf32(tile_backend) -> float:
    return ref.gemm_product_error("float32", tile_backend.capabilities)


def _check(got, want, dtype: str, scale: float = 1.0, product_error: float = 0.0) -> None:
    """``got`` within ``scale`` units of the dtype's tolerance of ``want`` (relative to its
    peak); ``product_error`` (``ref.gemm_product_error``: TF32 gemms) widens it."""
    tol = (2e-5 if dtype == "float32" else 2e-2) * scale + product_error * 4 * scale
    peak = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol * peak)


def _dtype(tile_backend, data, wanted=("float32", "float16")) -> str:
    usable = sorted(set(wanted) & set(tile_backend.capabilities.dtypes))
    return data.draw(st.sampled_from(usable), label="dtype")


# -- matmul, softmax ----------------------------------------------------------------------


@given(seed=st.integers(0, 2**16), data=st.data())
def test_matmul(tile_backend, seed, data) -> None:
    m, n, k = data.draw(st.sampled_from([(37, 24, 40), (64, 64, 64)]), label="mnk")
    dtype = _dtype(tile_backend, data)
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    _check(run.matmul_forward(a, b, tile_backend.target), a.astype(np.float64) @ b, dtype, scale=k ** 0.5,
           product_error=ref.gemm_product_error(dtype, tile_backend.capabilities))


@pytest.mark.parametrize("b_layout", ["kn", "nk"])
def test_fp8_matmul(tile_backend, b_layout) -> None:
    # one fixed case per B layout (row-major B copied transposed first; column-major B read
    # in place) where the backend computes with e4m3 (CUDA sm_89+, the CPU): exact fp8 products
    # summed in float32, against float64 sums of the same exact values
    if "float8_e4m3fn" not in tile_backend.capabilities.dtypes:
        pytest.skip("the target does not compute with float8_e4m3fn")
    fp8 = ref.np_dtype("float8_e4m3fn")
    rng = np.random.default_rng(21)
    m, n, k = 37, 40, 96
    a = rng.standard_normal((m, k)).astype(fp8)
    w = rng.standard_normal((n, k)).astype(fp8)
    b = w.T if b_layout == "nk" else np.ascontiguousarray(w.T)
    got = run.matmul_forward(a, b, tile_backend.target, "float32")
    _check(got, a.astype(np.float64) @ b.astype(np.float64), "float32", scale=k**0.5)


@given(seed=st.integers(0, 2**16), data=st.data())
def test_softmax_forward_and_backward(tile_backend, seed, data) -> None:
    m, n = data.draw(st.sampled_from([(19, 40), (64, 128)]), label="shape")
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal((2, m, n)) * 3).astype("float32")
    e = np.exp(x - x.max(1, keepdims=True).astype(np.float64))
    want_y = e / e.sum(1, keepdims=True)
    y = run.softmax_forward(x, tile_backend.target)
    _check(y, want_y, "float32")
    dx = run.softmax_backward(dy, y, tile_backend.target)
    _check(dx, want_y * (dy - (dy * want_y).sum(1, keepdims=True)), "float32")


# -- RMSNorm, LayerNorm ------------------------------------------------------------------


def _norm_reference(x, dy, w, b, eps, layer):
    x, dy, w = (a.astype(np.float64) for a in (x, dy, w))
    n = x.shape[1]
    mean = x.mean(1, keepdims=True) if layer else np.zeros((x.shape[0], 1))
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    y = xhat * w + (b if layer else 0.0)
    g = dy * w
    centred = g - g.mean(1, keepdims=True) if layer else g
    dx = rstd * (centred - xhat * (g * xhat).sum(1, keepdims=True) / n)
    return y, dx, (dy * xhat).sum(0), dy.sum(0)


@pytest.mark.parametrize("layer", [False, True], ids=["rms_norm", "layer_norm"])
@given(seed=st.integers(0, 2**16), data=st.data())
def test_norm_forward_and_backward(tile_backend, layer, seed, data) -> None:
    m, n = data.draw(st.sampled_from([(37, 48), (3, 256)]), label="shape")
    rng = np.random.default_rng(seed)
    x, dy = rng.standard_normal((2, m, n)).astype("float32")
    x += rng.standard_normal((m, 1)).astype("float32")  # row means LayerNorm must remove
    w, b = rng.standard_normal((2, n)).astype("float32")
    eps = 1e-5
    want_y, want_dx, want_dw, want_db = _norm_reference(x, dy, w, b, eps, layer)
    target = tile_backend.target
    if layer:
        y, mean, rstd = run.layer_norm_forward(x, w, b, eps, target)
        dx, dw, db = run.layer_norm_backward(dy, x, w, mean, rstd, target)
        _check(db, want_db, "float32", scale=10)
    else:
        y, rstd = run.rms_norm_forward(x, w, eps, target)
        dx, dw = run.rms_norm_backward(dy, x, w, rstd, target)
    _check(y, want_y, "float32", scale=5)
    _check(dx, want_dx, "float32", scale=20)
    _check(dw, want_dw, "float32", scale=20)


# -- FlashAttention forward and backward, flash-decoding ----------------------------------


def _attention_reference(q, k, v, dout, causal, offset=0):
    """Output and (dq, dk, dv) of softmax(q k^T / sqrt(d)) v in SDPA's layout, kv heads
    shared by ``heads // kv_heads`` query heads; query i sees keys j <= i + offset."""
    q, k, v, dout = (a.astype(np.float64) for a in (q, k, v, dout))
    groups = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ kr.transpose(0, 1, 3, 2) * scale
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j <= i + offset, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = p @ vr
    dp = dout @ vr.transpose(0, 1, 3, 2)
    ds = p * (dp - (dout * out).sum(-1, keepdims=True)) * scale
    dq = ds @ kr
    shape = (k.shape[0], k.shape[1], groups, *k.shape[2:])
    dk = (ds.transpose(0, 1, 3, 2) @ q).reshape(shape).sum(2)
    dv = (p.transpose(0, 1, 3, 2) @ dout).reshape(shape).sum(2)
    return out, dq, dk, dv


@given(causal=st.booleans(), seed=st.integers(0, 2**16), data=st.data())
def test_flash_attention_forward_and_backward(tile_backend, causal, seed, data) -> None:
    # (batch, heads, kv_heads, seq, dim): GQA (2 query heads per KV head), and MHA with a tail
    batch, heads, kv_heads, seq, dim = data.draw(
        st.sampled_from([(1, 2, 1, 24, 16), (2, 2, 2, 40, 32)]), label="shape")
    rng = np.random.default_rng(seed)
    q, dout = rng.standard_normal((2, batch, heads, seq, dim)).astype("float32")
    k, v = rng.standard_normal((2, batch, kv_heads, seq, dim)).astype("float32")
    want_out, want_dq, want_dk, want_dv = _attention_reference(q, k, v, dout, causal)
    target = tile_backend.target
    out, lse = run.flash_attention_forward(q, k, v, causal, None, target)
    tf32 = _tf32(tile_backend)
    _check(out, want_out, "float32", scale=5, product_error=tf32)
    dq, dk, dv = run.flash_attention_backward(dout, q, k, v, out, lse, causal, None, target)
    for got, want in ((dq, want_dq), (dk, want_dk), (dv, want_dv)):
        _check(got, want, "float32", scale=50, product_error=tf32)


@given(causal=st.booleans(), seed=st.integers(0, 2**16), data=st.data())
def test_flash_decode(tile_backend, causal, seed, data) -> None:
    # (batch, heads, kv_heads, seq_q, seq_kv, dim): one token, GQA 4:1; two tokens over a tail
    batch, heads, kv_heads, seq_q, seq_kv, dim = data.draw(
        st.sampled_from([(1, 4, 1, 1, 300, 16), (2, 2, 2, 2, 77, 32)]), label="shape")
    rng = np.random.default_rng(seed)
    q, dout = rng.standard_normal((2, batch, heads, seq_q, dim)).astype("float32")
    k, v = rng.standard_normal((2, batch, kv_heads, seq_kv, dim)).astype("float32")
    want = _attention_reference(q, k, v, dout, causal, offset=seq_kv - seq_q)[0]
    got = run.flash_decode_forward(q, k, v, causal, None, tile_backend.target)
    _check(got, want, "float32", scale=5, product_error=_tf32(tile_backend))


@given(seed=st.integers(0, 2**16), data=st.data())
def test_mla_decode(tile_backend, seed, data) -> None:
    batch, heads, kv_heads, seq = data.draw(st.sampled_from([(1, 16, 1, 45), (2, 8, 2, 64)]), label="shape")
    dim, pe = 32, 16
    rng = np.random.default_rng(seed)
    shapes = ((batch, heads, dim), (batch, heads, pe), (batch, seq, kv_heads, dim),
              (batch, seq, kv_heads, pe))
    args = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    _check(run.mla_decode_forward(*args, tile_backend.target), ref.mla_decode(*args), "float32", scale=5,
           product_error=_tf32(tile_backend))


@pytest.mark.parametrize("op", ["flash_attention", "flash_decode", "mla_decode"])
def test_attention_family_once_on_every_device(tile_backend, op) -> None:
    # one fixed case per op, small enough for the emulator in CI: GQA, a key tail and the
    # config each target gets (sm_90a: 64-row float32 tiles on mma.sync, no wgmma form;
    # gfx90a: the backward's tiles within 64 KiB of LDS; MLA: 4 heads per KV head, a tile
    # padded to one instruction's rows)
    rng = np.random.default_rng(7)
    target, tf32 = tile_backend.target, _tf32(tile_backend)
    if op == "mla_decode":
        shapes = ((2, 8, 32), (2, 8, 16), (2, 64, 2, 32), (2, 64, 2, 16))
        args = [rng.standard_normal(shape).astype("float32") for shape in shapes]
        _check(run.mla_decode_forward(*args, target), ref.mla_decode(*args), "float32", scale=5,
               product_error=tf32)
        return
    seq_q = 40 if op == "flash_attention" else 2
    q, dout = rng.standard_normal((2, 2, 4, seq_q, 32)).astype("float32")
    k, v = rng.standard_normal((2, 2, 2, 77 if op == "flash_decode" else 40, 32)).astype("float32")
    want_out, want_dq, want_dk, want_dv = _attention_reference(q, k, v, dout, True, k.shape[2] - seq_q)
    if op == "flash_decode":
        _check(run.flash_decode_forward(q, k, v, True, None, target), want_out, "float32", scale=5,
               product_error=tf32)
        return
    out, lse = run.flash_attention_forward(q, k, v, True, None, target)
    _check(out, want_out, "float32", scale=5, product_error=tf32)
    dq, dk, dv = run.flash_attention_backward(dout, q, k, v, out, lse, True, None, target)
    for got, want in ((dq, want_dq), (dk, want_dk), (dv, want_dv)):
        _check(got, want, "float32", scale=50, product_error=tf32)


# -- weight-only quantized matmul (GEMM and the decode GEMV) ------------------------------


def _codes(fmt: str, packed: np.ndarray) -> np.ndarray:
    """(N, K) codes of packed bytes, lowest bits first."""
    bits = 2 if fmt == "int2" else 4
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    return ((packed[..., None] >> shifts) & ((1 << bits) - 1)).reshape(packed.shape[0], -1).astype(np.int64)


def _dequantized(fmt, packed, scale, zeros, group):
    codes = _codes(fmt, packed)
    if fmt == "fp4":
        mag = np.asarray(ref.FP4_E2M1, np.float64)[codes & 7]
        values = np.where(codes >= 8, -mag, mag)
    elif fmt == "nf4":
        values = ref.nf4_levels()[codes]
    else:
        half = 8 if fmt == "int4" else 2
        values = np.where(codes >= half, codes - 2 * half, codes).astype(np.float64)
    if zeros is not None:
        values = values - np.repeat(zeros.astype(np.float64), group, axis=1)
    if scale is not None:
        values = values * np.repeat(scale.astype(np.float64), group, axis=1)
    return values


@pytest.mark.every_emulator_profile
@pytest.mark.parametrize("fmt", ["int4", "int2", "nf4", "fp4"])
@given(seed=st.integers(0, 2**16), data=st.data())
def test_dequant_matmul(tile_backend, fmt, seed, data) -> None:
    # one activation row runs the GEMV kernel, several the GEMM kernel
    m, n, k = data.draw(st.sampled_from([(1, 40, 128), (5, 24, 64)]), label="mnk")
    group = 32
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float32")
    packed = rng.integers(0, 256, size=(n, k * (2 if fmt == "int2" else 4) // 8)).astype(np.uint8)
    scale = (rng.random((n, k // group)) + 0.5).astype("float32")
    zeros = rng.integers(-1, 2, size=(n, k // group)).astype("float32") if fmt in ("int4", "int2") else None
    got = run.dequant_matmul_forward(a, packed, scale, zeros, fmt, group, tile_backend.target)
    want = a.astype(np.float64) @ _dequantized(fmt, packed, scale, zeros, group).T
    _check(got, want, "float32", scale=k ** 0.5,
           product_error=_tf32(tile_backend))
