"""Test helper for the ``gpu``-marked tests: run an fp16 GEMM kernel on the GPU and check it."""

from __future__ import annotations

from typing import Any

import pytest


def check_fp16_gemm_on_gpu(kernel: Any, m: int, n: int, k: int, sm90: bool = False) -> None:
    """Run ``kernel(a, b, c)`` on seeded (m, k) x (k, n) fp16 inputs; C must match an fp32 matmul.

    ``sm90``: the kernel needs an sm_90 GPU (TMA, wgmma); skip on any other.
    """
    torch = pytest.importorskip("torch")
    if sm90 and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("TMA and wgmma need an sm_90 GPU")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=2e-1)
