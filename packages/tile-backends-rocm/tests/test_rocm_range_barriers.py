"""A shared-memory barrier inside ``if tx >= 128:`` / ``T.ws(g)`` on ROCm is a typed refusal.

HIP's workgroup barrier (``s_barrier``) waits for every wave of the workgroup; AMD GPUs have
no barrier over a subset of waves with a thread count (CUDA's ``bar.sync id, count``). A
barrier the waves outside the condition never reach would hang, so compiling such a kernel
is a ``BackendError`` naming the kernel's line and saying how to restructure it.
"""

from __future__ import annotations

import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import BackendError


@T.prim_func
def second_group_transposes(A: T.Tensor((32, 64), "float32"), B: T.Tensor((64, 32), "float32")):
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((32, 64), "float32")
        with T.ws(1):  # threads 128..255, two of the four waves
            T.copy(A[0, 0], S)
            for i, j in T.Parallel(64, 32):
                B[i, j] = S[j, i]  # reads what other threads stored: needs a barrier


def test_a_barrier_inside_a_thread_range_is_refused_on_rocm() -> None:
    with pytest.raises(BackendError, match=r"keeps threads \[128, 256\) of the block") as caught:
        tilelang.compile(second_group_transposes, out_idx=[-1], target={"kind": "hip", "mcpu": "gfx90a"})
    error = caught.value
    assert "no barrier over part of a block" in (error.hint or "")
    assert error.location is not None and "B[i, j] = S[j, i]" in error.location.source_line
