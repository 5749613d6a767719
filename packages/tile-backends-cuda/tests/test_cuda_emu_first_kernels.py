"""Kernels a new user writes first, on every CUDA arch under the CPU emulator (issue 17).

Each case failed to compile or to run on some arch; each is compared with numpy.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T

pytestmark = [
    pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler"),
]
ARCHS = ["sm_80", "sm_90a"]


@pytest.fixture(autouse=True)
def emulate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")


def full_sum_kernel(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            xs = T.alloc_fragment((n,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[0:n], xs)
            T.reduce_sum(xs, s, dim=0)
            Y[0] = s[0]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_full_sum_of_a_1d_fragment(arch):
    kernel = tilelang.compile(full_sum_kernel(300), target={"kind": "cuda", "arch": arch})
    x = np.random.default_rng(3).standard_normal(300).astype("float32")
    y = np.zeros(1, "float32")
    kernel(x, y)
    np.testing.assert_allclose(y[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)
