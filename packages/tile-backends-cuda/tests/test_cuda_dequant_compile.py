"""Dequantized GEMM on CUDA: packed 4-bit weights unpacked in registers by the threads that use them.

The unpack loop reads ``B_local[i, j // 2]`` (two weights per byte) and
``Scale_local[i, j // group_size]`` inside a loop bound by the mma A-operand fragment.
Those buffers must live on the threads that read them; before layout inference knew
about ``j // 2`` they kept the copy's row-major layout and each thread indexed its
registers with another thread's slots (local memory, wrong values on a GPU).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cuda import probe_nvcc
from tile.ops.dequant_gemm import dequant_gemm_kernel, dequantize, pack_4bit

pytestmark = pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
SHAPE = (256, 256, 256)


@functools.cache
def compiled(fmt: str, arch: str):
    return tilelang.compile(
        dequant_gemm_kernel(*SHAPE, fmt), out_idx=[-1], target={"kind": "cuda", "arch": arch}
    )


@pytest.mark.parametrize("fmt", ["fp4", "int4"])
def test_dequant_gemm_sm80_compiles_without_spills_or_local_memory(fmt):
    kernel = compiled(fmt, "sm_80")
    stats = kernel.artifact.payload.stats
    assert stats.spills == 0 and stats.stack_bytes == 0, stats
    source = kernel.get_kernel_source("cuda")
    body = source[source.index("__global__") :]
    # the packed bytes are indexed by the local loop alone, never by threadIdx
    reads = [line for line in body.splitlines() if "B_local_ptr[" in line and "= " in line]
    assert reads and not any("threadIdx" in line.split("B_local_ptr[", 1)[1].split("]")[0] for line in reads)
    assert "HMMA.16816.F32" in kernel.get_kernel_source("sass")


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp4", "int4"])
def test_gpu_dequant_gemm_matches_numpy(fmt):
    import torch

    M, N, K = SHAPE
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    codes = rng.integers(0, 16, size=(N, K)).astype(np.uint8)
    packed = pack_4bit(codes)
    kernel = tilelang.compile(dequant_gemm_kernel(M, N, K, fmt), out_idx=[-1], target={"kind": "cuda"})
    args = [torch.from_numpy(a).cuda(), torch.from_numpy(packed).cuda()]
    scale = None
    if fmt == "int4":
        scale = (rng.random((N, K // 32)) + 0.5).astype(np.float16)
        args.append(torch.from_numpy(scale).cuda())
    ct = kernel(*args).float().cpu().numpy()
    ref = dequantize(packed, fmt, scale) @ a.astype(np.float32).T
    np.testing.assert_allclose(ct, ref, rtol=2e-2, atol=2e-1)
