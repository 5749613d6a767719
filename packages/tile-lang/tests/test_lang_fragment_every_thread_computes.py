"""A fragment that only statements outside ``T.Parallel`` write is held whole by every thread.

TileLang's mHC kernels (examples/deepseek_mhc) compute ``rms[0]`` in statements every thread
runs, then scale a 24-wide ``T.Parallel`` nest by it on a 96-thread block. tile gave ``rms`` a
one-owner layout and refused the read (``rms[0] is read inside a T.Parallel loop ... on a thread
that may not hold that element``); every thread computed the value, so every thread holds it.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a-emu", marks=needs_host_cxx),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80-emu", marks=needs_host_cxx),
    pytest.param({"kind": "hip", "arch": "gfx90a"}, id="gfx90a-emu", marks=needs_host_cxx),
]


def scaled_rows(tokens: int, splits: int, width: int, threads: int):
    @T.prim_func
    def main(X: T.Tensor((splits, tokens), "float32"), Y: T.Tensor((tokens, width), "float32")):
        with T.Kernel(tokens, threads=threads) as t:
            rms = T.alloc_fragment(1, "float32")
            stats = T.alloc_fragment((2,), "float32")
            mixes = T.alloc_fragment(width, "float32")
            rms[0] = 0
            for s in T.serial(splits):
                rms[0] += X[s, t]
            rms[0] = T.rsqrt(rms[0] + 1.0)
            stats[0] = rms[0] * 2.0
            stats[1] = X[0, t]
            for j in T.Parallel(width):
                mixes[j] = j * rms[0] + stats[1] - stats[0]
            T.copy(mixes, Y[t, :])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("width", "threads"), [(24, 96), (128, 128)])
def test_a_nest_reads_what_every_thread_computed(monkeypatch, target, width, threads):
    if target != "cpu":
        pytest.importorskip(f"tile.backends.{'cuda' if target['kind'] == 'cuda' else 'rocm'}")
        monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(scaled_rows(5, 4, width, threads), target=target)
    x = np.random.default_rng(2).random((4, 5)).astype("float32")
    y = np.zeros((5, width), "float32")
    kernel(x, y)
    rms = 1.0 / np.sqrt(x.sum(axis=0) + 1.0)
    want = np.arange(width)[None, :] * rms[:, None] + (x[0] - 2.0 * rms)[:, None]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
