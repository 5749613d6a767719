"""A shared tile whose size is a symbolic dim, as the kernel's only shared tile.

TileLang's testing/python/runtime/dynamic_shared_memory sizes its one shared tile by the
tensor's symbolic length; tile's storage plan left such a kernel unplanned and the compile
stopped at an internal contract check. The launch sizes the tile per call; the reference is
the input itself (the kernel copies it through the tile), at several lengths with one kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]


@pytest.mark.parametrize("target", TARGETS)
def test_a_symbolic_shared_tile_alone_is_sized_per_call(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    n = T.symbolic("n")

    @T.prim_func
    def through_shared(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((n,), "int32")
            T.copy(A, S)
            T.copy(S, B)

    kernel = tilelang.compile(through_shared, target=target)
    for length in (100, 37, 256, 100):
        a = np.random.default_rng(length).integers(-1000, 1000, length).astype(np.int32)
        b = np.zeros(length, np.int32)
        kernel(a, b)
        np.testing.assert_array_equal(b, a)
