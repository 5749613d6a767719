"""Pass prepack_b: a bf16 B shared by many blocks is packed once per launch, with the same results."""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_gemm_support import k_loop_gemm, run_bf16_product

import tile.lang as tilelang
from tile.backends.cpu._src import backend, ukernels

needs_ukernel = pytest.mark.skipif(
    not ukernels.use_bf16_gemm_ukernel(),
    reason="no AVX-512 BF16 on this CPU, or no host compiler to build the micro-kernel",
)


def compile_cpu(func, prepack=True, monkeypatch=None):
    if prepack:
        return tilelang.compile(func, target="cpu")
    assert monkeypatch is not None
    full = backend.pipeline
    monkeypatch.setattr(backend, "pipeline", lambda t: [p for p in full(t) if p.name != "prepack_b"])
    try:
        return tilelang.compile(func, target="cpu")
    finally:
        monkeypatch.setattr(backend, "pipeline", full)


def symbols(kernel) -> set[str]:
    llvm = kernel.artifact.sources["llvm"]
    return {s for s in ukernels.SYMBOLS if f"@{s}(" in llvm}


def run(kernel, M, N, K, trans_b, seed=0):
    return run_bf16_product(kernel, M, N, K, trans_b, seed)


PACKED = {ukernels.BF16_PACK_B_SYMBOL, ukernels.BF16_PACKED_GEMM_SYMBOL}


@needs_ukernel
@pytest.mark.parametrize(
    "M,N,K,block_M,block_N,trans_b",
    [
        (256, 192, 96, 64, 64, False),  # 4 block rows share each B column block
        (128, 256, 64, 64, 128, False),  # two 64-column groups per block
        (192, 320, 160, 64, 64, False),  # 5 groups, 3 block rows
        (256, 128, 96, 64, 64, True),  # B stored (N, K): packed by word transposition
        (64, 64, 576, 32, 64, True),  # more than one K chunk (256) of the packed-here path
        (64, 128, 2112, 32, 64, False),  # more than one K chunk (1024) of the prepacked path
    ],
)
def test_prepacked_b_matches_numpy_and_the_per_block_packing(monkeypatch, M, N, K, block_M, block_N, trans_b):
    monkeypatch.setenv("TILE_CACHE", "0")
    func = k_loop_gemm(M, N, K, block_M, block_N, 32, trans_b=trans_b)
    packed = compile_cpu(func)
    plain = compile_cpu(func, prepack=False, monkeypatch=monkeypatch)
    assert symbols(packed) == PACKED
    assert symbols(plain) == {ukernels.BF16_GEMM_SYMBOL}
    # Same panels, same micro-kernel, same summation order: the outputs are bit-identical.
    np.testing.assert_array_equal(run(packed, M, N, K, trans_b), run(plain, M, N, K, trans_b))


@needs_ukernel
@pytest.mark.parametrize(
    "M,N,K,block_M,block_N,why",
    [
        (64, 256, 96, 64, 64, "one block row: each B panel is read once, packing it first only adds a pass"),
        (128, 128, 96, 64, 32, "block columns start at multiples of 32, not of the 64-column groups"),
    ],
)
def test_prepack_is_skipped_where_it_cannot_pay_or_apply(monkeypatch, M, N, K, block_M, block_N, why):
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = compile_cpu(k_loop_gemm(M, N, K, block_M, block_N, 32))
    assert symbols(kernel) == {ukernels.BF16_GEMM_SYMBOL}, why
    run(kernel, M, N, K, False)


@needs_ukernel
def test_a_kernel_that_writes_b_keeps_per_block_packing(monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = compile_cpu(k_loop_gemm(256, 128, 64, 64, 64, 32, write_b=True))
    assert symbols(kernel) == {ukernels.BF16_GEMM_SYMBOL}


@needs_ukernel
def test_the_workspace_is_the_whole_packed_tensor(monkeypatch):
    """TVM sizes buffers by the elements their accesses name; the packed B must not be cut to one panel."""
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = compile_cpu(k_loop_gemm(256, 192, 96, 64, 64, 32))
    llvm = kernel.artifact.sources["llvm"]
    # 3 groups x 48 K pairs x 64 columns x 4 bytes.
    assert f"i64 {3 * 48 * 64 * 4}, i32 1, i32 32)" in llvm
