"""An expert-tier GPU call in a kernel compiled for the CPU is a typed error at its line.

``T.wait_wgmma`` (and every other mbarrier, wgmma, shuffle or TMA helper of the expert
tier) is a call into the CUDA device header. In a kernel that never reads its thread id
nothing else refused it on the CPU, and the CPU backend's JIT then met an unresolved
``tile_wgmma_wait<0>`` and took the process down with a segmentation fault.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError


def waits_then_copies(wait: bool):  # type: ignore[no-untyped-def]
    @T.prim_func
    def copy(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            if wait:
                T.wait_wgmma(0)
            for i in T.Parallel(4):
                B[i] = A[i]

    return copy


def test_a_wgmma_wait_is_refused_on_the_cpu_at_its_line() -> None:
    with pytest.raises(UnsupportedOnTargetError) as caught:
        tilelang.compile(waits_then_copies(wait=True), target="cpu")
    error = caught.value
    assert "expert-tier GPU call" in error.message
    assert error.location is not None and error.location.filename == __file__
    assert "T.wait_wgmma" in (error.location.source_line or "")


def test_the_same_kernel_without_it_runs() -> None:
    kernel = tilelang.compile(waits_then_copies(wait=False), target="cpu")
    a, b = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a)
