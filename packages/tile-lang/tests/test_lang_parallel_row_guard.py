"""A ``T.Parallel(rows, cols)`` nest whose body is guarded by the row alone
(``if i < valid_rows``), reading a GEMM's fragment: TileLang's sparse GQA decoders write
their valid heads this way. The nest binds to threads as one nest; rows past the guard
stay as they were. Checked against numpy on the CPU and the CUDA emulator."""

from __future__ import annotations

import numpy as np
import pytest
from _lang_kernels import EMU_TARGETS

import tile.lang as tilelang
import tile.lang.language as T

ROWS, DIM, VALID = 16, 64, 12


def guarded_rows():
    @T.prim_func
    def kernel(
        A: T.Tensor((ROWS, DIM), "float16"),
        B: T.Tensor((DIM, DIM), "float16"),
        Out: T.Tensor((ROWS, DIM), "float32"),
    ):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((ROWS, DIM), "float16")
            b = T.alloc_shared((DIM, DIM), "float16")
            acc = T.alloc_fragment((ROWS, DIM), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            for i, j in T.Parallel(ROWS, DIM):
                if i < VALID:
                    Out[i, j] = acc[i, j]

    return kernel




@pytest.mark.parametrize("target", EMU_TARGETS)
def test_rows_past_the_guard_are_untouched(monkeypatch, target):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((ROWS, DIM)).astype(np.float16)
    b = rng.standard_normal((DIM, DIM)).astype(np.float16)
    kernel = tilelang.compile(guarded_rows(), target=target)
    out = torch.full((ROWS, DIM), -7.0)
    kernel(torch.from_numpy(a), torch.from_numpy(b), out)
    expected = np.full((ROWS, DIM), -7.0, np.float32)
    expected[:VALID] = (a.astype(np.float32) @ b.astype(np.float32))[:VALID]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-2, atol=1e-2)
