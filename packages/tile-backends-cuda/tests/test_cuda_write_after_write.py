"""Two statements that store to the same shared elements from different threads are ordered.

``T.fill(S, -1)`` then ``T.copy(A, S)``: the fill gives element ``i * 128 + tx`` to thread
``tx``, the copy's vectorized loop gives four consecutive elements to each thread, so most
elements are filled by one thread and copied into by another. TVM's barrier plan (and
tile's, which followed it) ordered a read after a write and a write after a read, never a
write after a write, so a thread's fill could land after another thread's copy: the
emulator, which runs each thread to the next barrier in turn, kept 508 of the 1024 filled
values. The kernels run on the CPU emulator and are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from _emu_targets import TARGETS, compile_for

import tile.lang.language as T

pytestmark = pytest.mark.emu


def _fill_then_copy(n: int) -> T.PrimFunc:
    @T.prim_func
    def main(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((n, n), "float32")
            T.fill(S, -1.0)
            T.copy(A[0 : n // 2, 0:n], S[0 : n // 2, 0:n])  # the top half over the fill
            T.copy(S, B)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_a_copy_over_a_fill_lands_last(target: dict[str, str]) -> None:
    kernel = compile_for(_fill_then_copy(32), target)
    a = np.random.default_rng(7).standard_normal((32, 32)).astype(np.float32)
    want = np.full((32, 32), -1.0, np.float32)
    want[:16] = a[:16]
    np.testing.assert_array_equal(np.asarray(kernel(a)), want)
