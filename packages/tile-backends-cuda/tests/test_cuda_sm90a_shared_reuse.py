"""sm_90a's warp-specialized kernels share the bytes of shared tiles with disjoint lifetimes.

The kernel below is FlashAttention's shape of shared memory in small: ``A_s`` is loaded once
before the pipelined loop and read by every step's gemm, ``B_s`` is the ring the loop's TMA
producer fills, ``C_s`` takes the accumulator after the loop for the store. ``A_s`` and
``C_s`` are never live together, so ``C_s`` can take ``A_s``'s bytes, as it does on sm_80.
On sm_90a it did not (the MLA decoders asked for 294,912 bytes instead of 229,376), for two
reasons, both fixed: every tile the consumer warpgroups touch was allocated at the top of the
block, above the producer/consumer ``if``, where TVM's shared-memory merge counts each use as
a use of the whole ``if``; and the no-access pointer that keeps a swizzled tile's padding
(``apply_shared_layouts``) was placed right after the allocations, making every swizzled tile
live from the kernel's first statement.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda import probe_nvcc
from tile.testsupport.markers import needs_host_cxx

SM90A = {"kind": "cuda", "arch": "sm_90a"}
M, D, STEPS = 128, 64, 4
BLOCK = 64
TILE_BYTES = BLOCK * D * 2  # one 64 x 64 float16 tile


def once_then_loop_then_store() -> Any:
    """``C[i] = A[i] @ sum_k B[k]`` per 64-row block, through shared tiles as described above."""

    @T.prim_func
    def main(
        A: T.Tensor((M, D), "float16"),  # type: ignore[valid-type]
        B: T.Tensor((STEPS * D, D), "float16"),  # type: ignore[valid-type]
        C: T.Tensor((M, D), "float16"),  # type: ignore[valid-type]
    ):
        with T.Kernel(M // BLOCK, threads=128) as bx:
            A_s = T.alloc_shared((BLOCK, D), "float16")
            B_s = T.alloc_shared((D, D), "float16")
            C_s = T.alloc_shared((BLOCK, D), "float16")
            acc = T.alloc_fragment((BLOCK, D), "float32")
            T.copy(A[bx * BLOCK, 0], A_s)
            T.clear(acc)
            for k in T.Pipelined(STEPS, num_stages=2):
                T.copy(B[k * D, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            T.copy(C_s, C[bx * BLOCK, 0])

    return main


@functools.cache
def compiled(arch: str) -> Any:
    return tilelang.compile(once_then_loop_then_store(), out_idx=[-1], target={"kind": "cuda", "arch": arch})


def dynamic_shared(kernel: Any) -> int:
    return int(kernel.artifact.payload.recipe.dynamic_shared)


@pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_disjoint_tiles_share_bytes(arch: str) -> None:
    kernel = compiled(arch)
    source = kernel.get_kernel_source("cuda")
    if arch == "sm_90a":  # the warp-specialized path: a producer warpgroup fills B_s by TMA
        assert "tile_tma_load_2d" in source and "tile_setmaxnreg_inc" in source
        # C_s's first write waits for every consumer's last wgmma read of A_s (same bytes)
        last_read, first_write = source.rindex("tile_wgmma_m64"), source.index("tile_stmatrix")
        assert "tile_named_barrier_sync((uint)1, (uint)128);" in source[last_read:first_write]
    # A_s, the two stages of B_s; C_s reuses A_s's bytes (4 tiles without the reuse)
    assert dynamic_shared(kernel) == 3 * TILE_BYTES


@needs_host_cxx
@pytest.mark.emu
def test_reused_bytes_hold_the_right_values_on_the_emulator() -> None:
    # compiled here, under the emulator (a kernel compiled for the GPU launches on the GPU)
    kernel = tilelang.compile(once_then_loop_then_store(), out_idx=[-1], target=SM90A)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, D)).astype(np.float16)
    b = (rng.standard_normal((STEPS * D, D)) / 4).astype(np.float16)
    got = np.asarray(kernel(a, b)).astype(np.float32)
    want = a.astype(np.float32) @ b.astype(np.float32).reshape(STEPS, D, D).sum(axis=0)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
