"""A fragment read at indices shifted by an enclosing loop's variable (``acc[i + s * 16, j]``).

TileLang's sparse MLA backward (examples/dsa_sparse_finetune) stores a 32-row GEMM accumulator
half by half: ``for s in range(2)``, a ``T.Parallel(32, D)`` over the whole tile keeps the
rows ``i < 16`` and reads ``acc[i + s * 16, j]``. The nest now runs where the unshifted element
lives, and the shifted one is checked to be on the same thread at every point the read runs
(an mma accumulator holds rows 8 and 16 apart in one thread); before, the nest took a binding
of its own and the read was refused. A shift that does move the element to another thread
is still refused. Reference: numpy's product of the same float16 values.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import LayoutInferenceError
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]

ROWS, COLS, K, HALF = 32, 128, 64, 16


def halves(shift: int):
    @T.prim_func
    def stored_by_halves(
        A: T.Tensor((ROWS, K), "float16"),
        B: T.Tensor((COLS, K), "float16"),
        C: T.Tensor((ROWS, COLS), "float32"),
    ):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((ROWS, K), "float16")
            B_s = T.alloc_shared((COLS, K), "float16")
            acc = T.alloc_fragment((ROWS, COLS), "float32")
            half = T.alloc_shared((HALF, COLS), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
            for s in range(ROWS // HALF):
                for i, j in T.Parallel(ROWS, COLS):
                    if i < HALF - shift:
                        half[i, j] = acc[i + s * HALF + shift, j]
                T.copy(half, C[s * HALF, 0])

    return stored_by_halves


@pytest.mark.parametrize("target", TARGETS)
def test_an_accumulator_stored_half_by_half(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((ROWS, K)).astype(np.float16)
    b = rng.standard_normal((COLS, K)).astype(np.float16)
    c = np.zeros((ROWS, COLS), np.float32)
    tilelang.compile(halves(0), target=target)(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32).T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("target", TARGETS[1:])
def test_a_shift_onto_another_thread_is_still_refused(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    with pytest.raises(LayoutInferenceError, match=r"acc\[i \+ s \* 16 \+ 1, j\] is read"):
        tilelang.compile(halves(1), target=target)  # row i + 1: another lane of the warp
