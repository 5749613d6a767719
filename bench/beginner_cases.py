"""Beginner-tier benchmark cases for ``bench/run.py``.

Each array program written with ``tile.lang.beginner`` is timed against (a) the hand-written
tile-ops kernel for the same computation (target: within 1.25x, i.e. ratio >= 0.8), and
(b) the same composite in numpy and in torch eager (target: faster, ratio >= 1.0).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from harness import Case

import tile.lang as tilelang
import tile.lang.beginner as tb
from tile.ops.attention import flash_attention_kernel
from tile.ops.gemm import matmul_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel

RNG = np.random.default_rng(1)
WITHIN = 0.8  # ratio >= 0.8: the beginner program is within 1.25x of the hand-written kernel


@tb.jit(target="cpu")
def mlp(x, w, b):
    return tb.gelu(x @ w + b)


@tb.jit(target="cpu")
def softmax(x):
    e = tb.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tb.jit(target="cpu")
def rms_norm(x, w):
    return x * tb.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


@tb.jit(target="cpu")
def attention(q, k, v):
    s = q @ k.mT * 0.125
    e = tb.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def _np_gelu(z):
    return 0.5 * z * (1 + np.tanh(0.7978845608028654 * (z + 0.044715 * z**3)))


def _three(name: str, run: Callable[[], object], hand: Callable[[], object], hand_name: str,
           np_ref: Callable[[], object], torch_ref: Callable[[], object], check: Callable[[], None],
           **work: float) -> list[Case]:
    return [
        Case(f"beginner {name} vs tile-ops", run, hand, hand_name, check=check, target=WITHIN, **work),
        Case(f"beginner {name} vs numpy", run, np_ref, "numpy composite", target=1.0, **work),
        Case(f"beginner {name} vs torch eager", run, torch_ref, "torch eager composite", target=1.0, **work),
    ]


def mlp_cases(n: int) -> list[Case]:
    import torch

    x, w, b = (RNG.standard_normal(s).astype("float32") for s in ((n, n), (n, n), (n,)))
    tx, tw, tbias = (torch.from_numpy(a) for a in (x, w, b))
    hand = tilelang.compile(matmul_kernel(n, n, n, dtype="float32", accum_dtype="float32", block_M=64,
                                          block_N=64, block_K=32, num_stages=2), out_idx=[-1], target="cpu")

    def check() -> None:
        np.testing.assert_allclose(mlp(x, w, b), _np_gelu(x @ w + b), rtol=1e-3, atol=1e-3)

    return _three(f"matmul+bias+GELU {n}^3 fp32", lambda: mlp(x, w, b), lambda: hand(x, w),
                  "tile-ops matmul (no epilogue)", lambda: _np_gelu(x @ w + b),
                  lambda: torch.nn.functional.gelu(tx @ tw + tbias, approximate="tanh"), check,
                  flops=2.0 * n**3)


def softmax_cases(m: int, n: int) -> list[Case]:
    import torch

    x = RNG.standard_normal((m, n)).astype("float32")
    tx = torch.from_numpy(x)
    hand = tilelang.compile(softmax_kernel(m, n), out_idx=[-1], target="cpu")

    def np_softmax():
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def torch_softmax():
        e = torch.exp(tx - tx.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    def check() -> None:
        np.testing.assert_allclose(softmax(x), np_softmax(), rtol=1e-4, atol=1e-6)

    return _three(f"softmax {m}x{n} fp32", lambda: softmax(x), lambda: hand(x), "tile-ops softmax",
                  np_softmax, torch_softmax, check, bytes_moved=2.0 * x.nbytes)


def rms_norm_cases(m: int, n: int) -> list[Case]:
    import torch

    x, w = RNG.standard_normal((m, n)).astype("float32"), RNG.standard_normal(n).astype("float32")
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    hand = tilelang.compile(rms_norm_kernel(m, n), out_idx=[-1], target="cpu")

    def check() -> None:
        ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
        np.testing.assert_allclose(rms_norm(x, w), ref, rtol=1e-4, atol=1e-5)

    return _three(f"RMSNorm {m}x{n} fp32", lambda: rms_norm(x, w), lambda: hand(x, w), "tile-ops rms_norm",
                  lambda: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w,
                  lambda: tx * torch.rsqrt((tx * tx).mean(-1, keepdim=True) + 1e-6) * tw, check,
                  bytes_moved=2.0 * x.nbytes)


def attention_cases(seq: int, heads: int = 8, dim: int = 64) -> list[Case]:
    import torch

    q, k, v = (RNG.standard_normal((1, heads, seq, dim)).astype("float32") for _ in range(3))
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    hand = tilelang.compile(flash_attention_kernel(1, heads, seq, dim, False, dtype="float32",
                                                   accum_dtype="float32", block_M=128, block_N=128,
                                                   num_stages=2), out_idx=[-1], target="cpu")
    # the hand-written kernel takes (batch, seq, heads, dim)
    hq, hk, hv = (np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v))

    def np_attention():
        s = q @ np.swapaxes(k, -1, -2) * 0.125
        e = np.exp(s - s.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v

    def torch_attention():
        s = tq @ tk.transpose(-1, -2) * 0.125
        e = torch.exp(s - s.amax(-1, keepdim=True))
        return (e / e.sum(-1, keepdim=True)) @ tv

    def check() -> None:
        np.testing.assert_allclose(attention(q, k, v), np_attention(), rtol=1e-3, atol=1e-4)
        written = [n.shape for kernel in attention.plan(q, k, v).kernels for n in kernel.outputs]
        assert all(shape[-2:] != (seq, seq) for shape in written), "a seq x seq intermediate was written"

    return _three(f"attention from primitives b1 h{heads} s{seq} d{dim} fp32", lambda: attention(q, k, v),
                  lambda: hand(hq, hk, hv), "tile-ops flash_attention", np_attention, torch_attention,
                  check, flops=4.0 * seq * seq * dim * heads)


def cases(quick: bool) -> list[tuple[str, Callable[[], list[Case]]]]:
    if quick:
        return [("beginner", lambda: [*mlp_cases(256), *softmax_cases(256, 1024), *rms_norm_cases(256, 1024),
                                      *attention_cases(256, heads=2)])]
    return [
        ("beginner mlp", lambda: mlp_cases(1024)),
        ("beginner softmax", lambda: softmax_cases(4096, 4096)),
        ("beginner rmsnorm", lambda: rms_norm_cases(4096, 4096)),
        ("beginner attention", lambda: attention_cases(1024)),
    ]
