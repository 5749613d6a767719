"""``T.print`` in a HIP kernel under the emulator: one device printf per value (issue 17)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T

pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++", "clang++")),
    reason="no host C++ compiler for the emulator",
)


def print_kernel():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            shared = T.alloc_shared((4,), "float32")
            T.copy(A[bx * 4], shared)
            T.print(shared, msg="shared")
            for i in T.Parallel(4):
                B[bx * 4 + i] = shared[i] * 2.0

    return main


def test_print_of_a_shared_tile_is_a_printf_of_thread_0(monkeypatch, capfd):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(print_kernel(), out_idx=[1], target={"kind": "hip", "mcpu": "gfx90a"})
    assert "printf(" in kernel.get_kernel_source("hip")
    a = np.arange(8, dtype="float32") - 2.25
    np.testing.assert_array_equal(kernel(a), a * 2.0)
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if line.startswith("[block"))
    want = [f"[block ({b}, 0, 0)] shared: shared[{i}] = {a[b * 4 + i]:g}" for b in (0, 1) for i in range(4)]
    assert lines == sorted(want)
