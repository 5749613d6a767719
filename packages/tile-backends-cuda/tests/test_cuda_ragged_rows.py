"""Softmax and RMSNorm rows whose length is not a multiple of the vector width (N = 333).

The 16 x 333 tile does not divide over 128 threads; its default binding splits rows and
columns (``layout_rules.linear_fragment``) so the row reductions can follow it. Compiled
for sm_80 and sm_90a (no spills), and run for sm_80 under the CPU emulator against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cuda import probe_nvcc
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.markers import needs_host_cxx

pytestmark = pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
needs_host_compiler = needs_host_cxx
M, N = 40, 333  # 40 rows: the last block of 16 is partial too


def _softmax_reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _rms_reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("factory", [softmax_kernel, rms_norm_kernel])
def test_ragged_rows_compile_without_spills(arch: str, factory: object) -> None:
    kernel = tilelang.compile(factory(1024, N, "float16"), target={"kind": "cuda", "arch": arch})  # type: ignore[operator]
    stats = kernel.artifact.payload.stats
    assert stats.spills == 0 and stats.stack_bytes == 0, stats
    source = kernel.get_kernel_source("cuda")
    assert "tile::shfl_xor" in source  # a row's 16 owners meet through shuffles
    assert "x_ptr[42]" in source  # 2 rows x ceil(333 / 16) columns per thread


@needs_host_compiler
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_ragged_rows_match_numpy_on_the_emulator(monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    target = {"kind": "cuda", "arch": "sm_80"}
    rng = np.random.default_rng(333)
    x = (rng.standard_normal((M, N)) * 3).astype(dtype)
    w = rng.standard_normal(N).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 2e-3
    softmax = tilelang.compile(softmax_kernel(M, N, dtype), out_idx=[-1], target=target)
    np.testing.assert_allclose(softmax(x).astype(np.float64), _softmax_reference(x), rtol=tol, atol=tol)
    rms = tilelang.compile(rms_norm_kernel(M, N, dtype), out_idx=[-1], target=target)
    np.testing.assert_allclose(rms(x, w).astype(np.float64), _rms_reference(x, w), rtol=tol, atol=tol * 4)
