"""Scalar names bound inside a ``T.Pipelined`` body (``k = n - 1 - kr``, a page looked up in a
table), as TileLang's paged MLA decoder writes them: each pipelined statement must use its
own iteration's value. Checked against numpy on the CPU and the CUDA emulator (sm_80's
cp.async ring, sm_90a)."""

from __future__ import annotations

import numpy as np
import pytest
from _lang_kernels import EMU_TARGETS

import tile.lang as tilelang
import tile.lang.language as T

ROWS, BLOCK, COLS = 256, 32, 16
STEPS = ROWS // BLOCK


def reversed_pages():
    """Out = sum over steps kr of A[page(kr)] * (k + 1), k = STEPS - 1 - kr, page(kr) = table[k]."""

    @T.prim_func
    def kernel(
        A: T.Tensor((ROWS, COLS), "float16"),
        table: T.Tensor((STEPS,), "int32"),
        Out: T.Tensor((BLOCK, COLS), "float32"),
    ):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((BLOCK, COLS), "float16")
            acc = T.alloc_fragment((BLOCK, COLS), "float32")
            T.clear(acc)
            for kr in T.Pipelined(STEPS, num_stages=2):
                k = STEPS - 1 - kr
                start = table[k] * BLOCK
                T.copy(A[start : start + BLOCK, :], tile)
                for i, j in T.Parallel(BLOCK, COLS):
                    acc[i, j] += T.Cast("float32", tile[i, j]) * T.Cast("float32", k + 1)
            T.copy(acc, Out)

    return kernel




@pytest.mark.parametrize("target", EMU_TARGETS)
def test_each_pipelined_statement_uses_its_own_iteration(monkeypatch, target):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    table = rng.permutation(STEPS).astype(np.int32)
    expected = np.zeros((BLOCK, COLS), np.float32)
    for kr in range(STEPS):
        k = STEPS - 1 - kr
        page = table[k]
        expected += a[page * BLOCK : (page + 1) * BLOCK].astype(np.float32) * (k + 1)
    kernel = tilelang.compile(reversed_pages(), out_idx=[-1], target=target)
    out = kernel(torch.from_numpy(a), torch.from_numpy(table))
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-3, atol=1e-3)
