"""The beginner tier (tile.lang.beginner) compiled for gfx90a, run under the emulator.

The generated developer-tier programs go through the ROCm backend unchanged (MFMA GEMMs
with fused epilogues, wave64 row reductions, the online-softmax attention kernel) and the
HIP source runs on the emulator; results are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang.beginner as tb
from tile.testsupport.markers import needs_host_cxx

pytestmark = needs_host_cxx
RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def emulate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")


def half(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float16")


def block_reference(x, w, b, g):
    h = x.astype("float32") @ w.astype("float32") + b.astype("float32")
    h = 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))
    n = h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * g.astype("float32")
    e = np.exp(n - n.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("arch", ["gfx90a"])
def test_rocm_emu_beginner_mlp_rmsnorm_softmax(arch: str) -> None:
    @tb.jit(target={"kind": "hip", "mcpu": arch})
    def block(x, w, b, g):
        h = tb.gelu(x @ w + b)
        n = h * tb.rsqrt((h * h).mean(axis=-1, keepdims=True) + 1e-6) * g
        return tb.softmax(n, axis=-1).astype("float16")

    x, w, b, g = half(40, 32), half(32, 64), half(64), half(64)
    assert [k.kind for k in block.plan(x, w, b, g).kernels] == ["matmul", "rows"]
    out = block(x, w, b, g)
    np.testing.assert_allclose(out.astype("float32"), block_reference(x, w, b, g), rtol=2e-2, atol=2e-3)


def test_rocm_emu_beginner_attention_from_primitives() -> None:
    @tb.jit(target={"kind": "hip", "mcpu": "gfx90a"})
    def attention(q, k, v):
        s = q @ k.mT * 0.125
        e = tb.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    q, k, v = half(1, 2, 40, 64), half(1, 2, 72, 64), half(1, 2, 72, 64)
    assert [kk.kind for kk in attention.plan(q, k, v).kernels] == ["attention"]
    s = q.astype("float32") @ np.swapaxes(k, -1, -2).astype("float32") / 8
    e = np.exp(s - s.max(-1, keepdims=True))
    ref = (e / e.sum(-1, keepdims=True)) @ v.astype("float32")
    np.testing.assert_allclose(attention(q, k, v).astype("float32"), ref, rtol=2e-2, atol=2e-2)
