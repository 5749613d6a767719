"""The CUDA shared-memory limit is checked on the planned arena, not on the allocations as written.

Buffers with disjoint lifetimes share bytes, so a kernel whose allocations add up to more
than sm_80's 163 KiB but never holds more than 128 KiB at once compiles (and runs under the
emulator); one that holds too much at once is refused, naming its buffers; and a pipelined
tile counts once per stage, which the as-written sum used to miss.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import ResourceLimitError
from tile.testsupport.markers import needs_host_cxx

pytestmark = pytest.mark.emu  # builds without nvcc; runs on the CPU emulator
SM80 = {"kind": "cuda", "arch": "sm_80"}
N = 128


def staged_add(overlap: bool):
    """C = A + B through three 64 KiB shared tiles; ``overlap`` keeps A and B alive past C's first write."""

    @T.prim_func
    def add(A: T.Tensor((N, N), "float32"), B: T.Tensor((N, N), "float32"), C: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((N, N), "float32")
            B_s = T.alloc_shared((N, N), "float32")
            C_s = T.alloc_shared((N, N), "float32")
            C_l = T.alloc_fragment((N, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            for i, j in T.Parallel(N, N):
                C_l[i, j] = A_s[i, j] + B_s[i, j]
            T.copy(C_l, C_s)
            if overlap:  # A_s and B_s are read after C_s is written: all three live at once
                for i, j in T.Parallel(N, N):
                    C_l[i, j] = C_s[i, j] + A_s[i, j] - B_s[i, j]
                T.copy(C_l, C)
            else:
                T.copy(C_s, C)

    return add


@needs_host_cxx
def test_disjoint_lifetimes_share_bytes_and_the_kernel_runs():
    kernel = tilelang.compile(staged_add(False), out_idx=[-1], target=SM80)
    a, b = np.random.rand(N, N).astype("float32"), np.random.rand(N, N).astype("float32")
    np.testing.assert_allclose(np.asarray(kernel(a, b)), a + b, rtol=1e-6)


def test_buffers_live_at_once_are_refused_with_their_lines():
    with pytest.raises(ResourceLimitError, match="disjoint lifetimes") as info:
        tilelang.compile(staged_add(True), out_idx=[-1], target=SM80)
    assert "A_s (128x128 float32" in str(info.value) and "C_s" in str(info.value)


def test_a_pipelined_tile_counts_once_per_stage():
    stages = 4  # 2 x 32 KiB tiles as written (fits), 4 copies each when pipelined (256 KiB: does not)

    @T.prim_func
    def gemm(
        A: T.Tensor((N, 1024), "float16"), B: T.Tensor((1024, N), "float16"), C: T.Tensor((N, N), "float32")
    ):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((N, 128), "float16")
            B_s = T.alloc_shared((128, N), "float16")
            C_l = T.alloc_fragment((N, N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(8, num_stages=stages):
                T.copy(A[0, k * 128], A_s)
                T.copy(B[k * 128, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    with pytest.raises(ResourceLimitError, match="once per stage") as info:
        tilelang.compile(gemm, out_idx=[-1], target=SM80)
    # each tile's bytes count its 4 stages, and the message says so (issue 17)
    assert "A_s (128x128 float16 x 4 stages, 131072 bytes)" in str(info.value)
