"""Compile-only checks (no GPU): tile kernels to CUDA source and a cubin for sm_80 / sm_90a.

Each kernel is compiled once per arch (module-scoped cache); the checks read ptxas'
report (zero spills) and the SASS (vector loads, shuffles, barriers, atomics).
"""

from __future__ import annotations

import re

import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda import probe_nvcc
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.kernels import staged_add

pytestmark = pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
ARCHS = ["sm_80", "sm_90a"]


def elementwise_kernel(M, N, block_M=64, block_N=64, dtype="float32"):
    """``C = A + B`` through shared tiles (``tile.testsupport.kernels.staged_add``)."""
    return staged_add(M, N, block_M, block_N, dtype)


def cumsum_kernel(M, N, block_M=32, dtype="float32"):
    @T.prim_func
    def scan(X: T.Tensor((M, N), dtype), Prefix: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], tile)
            T.cumsum(tile, dim=1)
            T.copy(tile, Prefix[bx * block_M, 0])

    return scan


def atomic_rows_kernel(M, N, split=4, block_M=32, dtype="float32"):
    """Split-K style: each block of ``split`` adds its column-slice row sums into Out."""

    @T.prim_func
    def rows(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), split, threads=128) as (bx, bz):
            x = T.alloc_fragment((block_M, N // split), dtype)
            s = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, bz * (N // split)], x)
            T.reduce_sum(x, s, dim=1)
            T.atomic_add(Out[bx * block_M], s)

    return rows


KERNELS = {
    "elementwise": lambda: elementwise_kernel(1024, 1024),
    "elementwise_tail": lambda: elementwise_kernel(1000, 777),
    "softmax": lambda: softmax_kernel(1024, 512, "float16"),
    "rms_norm": lambda: rms_norm_kernel(1024, 512, "float16"),
    "atomic_rows": lambda: atomic_rows_kernel(256, 512),
    "cumsum": lambda: cumsum_kernel(256, 128),
}
_built: dict[tuple[str, str], object] = {}


def compiled(name: str, arch: str):
    key = (name, arch)
    if key not in _built:
        _built[key] = tilelang.compile(KERNELS[name](), target={"kind": "cuda", "arch": arch})
    return _built[key]


def opcodes(kernel) -> set[str]:
    return set(re.findall(r"\b([A-Z][A-Z0-9]+(?:\.[A-Z0-9_]+)*)\b", kernel.get_kernel_source("sass")))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_to_cubin_without_spills(name, arch):
    kernel = compiled(name, arch)
    stats = kernel.artifact.payload.stats
    assert kernel.artifact.payload.cubin[:4] == b"\x7fELF"
    assert stats.spills == 0 and stats.stack_bytes == 0, stats
    assert 0 < stats.registers <= 255
    source = kernel.get_kernel_source("cuda")
    assert source.startswith('#include "tile_cuda.h"')
    kernel_body = source[source.index("__global__") :]
    assert "asm" not in kernel_body  # special instructions are header calls, never inline PTX


@pytest.mark.parametrize("arch", ARCHS)
def test_aligned_copies_are_128_bit(arch):
    ops = opcodes(compiled("elementwise", arch))
    assert any(op.startswith("LDG.E.128") for op in ops), ops
    # the tail kernel cannot prove 16-byte alignment (777 columns): scalar accesses only
    tail = opcodes(compiled("elementwise_tail", arch))
    assert not any(op.startswith("LDG.E.128") for op in tail)


@pytest.mark.parametrize("name", ["softmax", "rms_norm"])
def test_row_reductions_use_warp_shuffles_and_a_barrier(name):
    kernel = compiled(name, "sm_80")
    ops = opcodes(kernel)
    assert "SHFL.BFLY" in ops, ops
    # rows span 4 warps: partials meet in shared memory behind a barrier
    assert any(op.startswith("BAR.SYNC") for op in ops), ops
    assert "tile::shfl_xor" in kernel.get_kernel_source("cuda")


def test_max_reduction_starts_at_minus_infinity():
    source = compiled("softmax", "sm_80").get_kernel_source("cuda")
    assert "row_max_acc_ptr[0] = -CUDART_INF_F;" in source
    assert "row_sum_acc_ptr[0] = 0x0p+0f" in source


def test_shared_producer_and_consumer_are_separated_by_a_barrier():
    source = compiled("elementwise", "sm_80").get_kernel_source("cuda")
    body = source[source.index("__global__") :]
    # A_shared/B_shared are written by one thread and read by another: a barrier between
    first_read = re.search(r"C_local_ptr\[\w+\] = ", body).start()
    assert "__syncthreads()" in body[:first_read]
    assert any(op.startswith("BAR.SYNC") for op in opcodes(compiled("elementwise", "sm_80")))


def test_atomics_go_through_the_header():
    kernel = compiled("atomic_rows", "sm_80")
    assert "tile::atomic_add(" in kernel.get_kernel_source("cuda")
    ops = opcodes(kernel)
    assert any(op.startswith(("RED.", "ATOM")) for op in ops), ops


def test_ptx_and_device_tir_are_available():
    kernel = compiled("elementwise", "sm_80")
    assert ".target sm_80" in kernel.get_kernel_source("ptx")
    assert kernel.artifact.entry_name in kernel.get_kernel_source("device_tir")
