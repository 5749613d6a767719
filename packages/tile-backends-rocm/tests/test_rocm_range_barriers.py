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
def upper_half_reverses(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((64, 64), "float32")
        tx = T.get_thread_binding()
        if tx >= 128:
            for i, j in T.Parallel(64, 64):
                S[i, j] = A[i, j] * 2.0
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[63 - i, 63 - j]  # reads what other threads stored: needs a barrier


def test_a_barrier_inside_a_thread_range_is_refused_on_rocm() -> None:
    with pytest.raises(BackendError, match=r"keeps threads \[128, 256\) of the block") as caught:
        tilelang.compile(upper_half_reverses, out_idx=[-1], target={"kind": "hip", "mcpu": "gfx90a"})
    error = caught.value
    assert "no barrier over part of a block" in (error.hint or "")
    assert error.location is not None and "B[i, j] = S[63 - i, 63 - j]" in error.location.source_line
