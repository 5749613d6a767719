"""The beginner tier on sm_90a under the emulator (wgmma GEMM with a fused epilogue, TMA and
warp specialization where the pipeline chooses them); sm_80 and gfx90a run the same programs
in the conformance suite's beginner family (cuda-emu, rocm-emu)."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang.beginner as tb
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]


def test_cuda_emu_beginner_sm90a_gemm_epilogue_and_row_kernel() -> None:
    @tb.jit(target={"kind": "cuda", "arch": "sm_90a"})
    def block(x, w, b):
        h = tb.relu(x @ w + b)
        return h / tb.sqrt((h * h).sum(axis=-1, keepdims=True) + 1.0)

    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype("float16") for s in ((64, 64), (64, 64), (64,)))
    assert [k.kind for k in block.plan(x, w, b).kernels] == ["matmul", "rows"]
    h = np.maximum(x.astype("float32") @ w.astype("float32") + b.astype("float32"), 0)
    ref = h / np.sqrt((h * h).sum(-1, keepdims=True) + 1.0)
    np.testing.assert_allclose(block(x, w, b).astype("float32"), ref, rtol=2e-2, atol=2e-3)
