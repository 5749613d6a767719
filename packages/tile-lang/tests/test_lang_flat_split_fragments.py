"""A fragment the default binding spreads by its flat index is reduced and bound again.

TileLang's issue 1719: a ``T.Parallel(32, 4, 4)`` nest on 128 threads puts element ``p``
(row-major position ``16 i + 4 j + k``) on thread ``p % 128``, register ``p // 128``,
simplified to ``i // 8``. TVM's iterator-map analysis could not invert that, so
``T.reduce_sum(..., dim=1)`` stopped (``LayoutError: cannot invert non-affine layout``), and
the reduced fragment, replicated over the reduced dim, could not bind the loop that reads it.
The layouts are now inverted through the position (tile-layout's test_layout.py); here the
kernel runs on the emulators and the CPU, against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend

N, M = 32, 4


@T.prim_func
def _reduce_then_divide(
    A: T.Tensor((N, M, M), "float32"), D: T.Tensor((N, M), "float32"), C: T.Tensor((N, M), "float32")
):
    with T.Kernel(1):  # 128 threads, TileLang's default
        cube = T.alloc_fragment((N, M, M), "float32")
        summed = T.alloc_fragment((N, M), "float32")
        divisor = T.alloc_fragment((N, M), "float32")
        for i, j, k in T.Parallel(N, M, M):
            cube[i, j, k] = A[i, j, k]
        T.reduce_sum(cube, summed, dim=1)
        T.copy(D, divisor)
        for i, k in T.Parallel(N, M):
            summed[i, k] /= divisor[i, k]
        T.copy(summed, C)


TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="cuda-sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "hip", "mcpu": "gfx90a"}, id="rocm-gfx90a", marks=needs_backend("rocm")),
]


@pytest.mark.parametrize("target", TARGETS)
def test_a_reduction_over_a_flat_split_fragment(target, monkeypatch):
    if target != "cpu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
    rng = np.random.default_rng(19)
    a = rng.standard_normal((N, M, M)).astype(np.float32)
    d = rng.uniform(1.0, 2.0, (N, M)).astype(np.float32)
    c = tilelang.compile(_reduce_then_divide, out_idx=[2], target=target)(a, d)
    np.testing.assert_allclose(np.asarray(c), a.sum(axis=1) / d, rtol=1e-5, atol=1e-6)
