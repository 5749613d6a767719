"""sm_90a kernels under the CPU emulator (TILE_DEVICE=emu): wgmma, TMA, mbarriers, warp specialization.

The generated CUDA source of the paper GEMM (with and without the TMA + mbarrier
warp-specialized pipeline), FlashAttention, MLA decode, softmax and RMSNorm runs on the
emulator's hopper.h and is compared with numpy. Fault injection patches the generated
source the way a lowering bug would (a consumer that reads a stage before its mbarrier
wait, a descriptor with the wrong swizzle mode, a wgmma operand stored without a proxy
fence): each mutant must give a wrong result or a reported fault while the unmodified
kernel passes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cpu.simt import SimtFault, SimtMisuseError
from tile.backends.cuda._src.emulation import EmulatedCudaKernel
from tile.ops.attention import flash_attention_kernel
from tile.ops.gemm import matmul_kernel
from tile.ops.mla import flash_mla_decode_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.markers import needs_host_cxx
from tile.testsupport.references import attention as sdpa

pytestmark = [needs_host_cxx, pytest.mark.emu]


def sm90(warp_specialize: bool = False) -> dict[str, str]:
    return {"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1" if warp_specialize else "0"}


def paper_gemm(warp_specialize: bool) -> Any:
    func = matmul_kernel(256, 256, 256, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    return tilelang.compile(func, target=sm90(warp_specialize)).artifact.payload


def run_gemm(binary: Any, source: str) -> tuple[np.ndarray, np.ndarray]:
    kernel = EmulatedCudaKernel(source, binary.recipe, binary.params)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float16)
    b = rng.standard_normal((256, 256)).astype(np.float16)
    c = np.zeros((256, 256), np.float16)
    kernel(a, b, c)
    return c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32)


@pytest.fixture(scope="module")
def gemm_tma() -> Any:
    return paper_gemm(True)


@pytest.mark.parametrize("warp_specialize", [False, True])
def test_paper_gemm_on_sm90a(warp_specialize, gemm_tma):
    binary = gemm_tma if warp_specialize else paper_gemm(False)
    source = binary.source
    assert "tile_wgmma_m64n128k16_ss_f16_f32" in source
    if warp_specialize:  # a producer warpgroup issues TMA into an mbarrier ring
        for call in (
            "tile_tma_load_2d",
            "tile_mbarrier_arrive_expect_tx",
            "tile_mbarrier_wait",
            "tile_setmaxnreg",
        ):
            assert call in source
    got, want = run_gemm(binary, source)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-2)


def test_library_sm90a_gemm_config_on_a_ragged_grid():
    # tile.ops.gemm's sm_90a tiling (128x256x64, two consumer warpgroups, panels of 8 block
    # rows), warp-specialized, on 9 block rows (a last panel of one row) and a ragged N and K
    from tile.ops.gemm import GemmConfig, gemm_config

    config = gemm_config(1100, 400, 136, "float16", sm90(True))
    assert config == GemmConfig(128, 256, 64, 3, 256, panel=8)
    func = matmul_kernel(1100, 400, 136, **dataclasses.asdict(config))
    kernel = tilelang.compile(func, out_idx=[-1], target=sm90(True))
    source = kernel.get_kernel_source("cuda")
    assert "tile_wgmma_m64n128k16_ss_f16_f32" in source and "tile_tma_load_2d" in source
    assert "by_swizzled" in source
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1100, 136)).astype(np.float16)
    b = rng.standard_normal((136, 400)).astype(np.float16)
    got = kernel(a, b).astype(np.float32)
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-3, atol=3e-2)


@pytest.mark.parametrize(
    ("causal", "stages", "warp_specialize"), [(False, 1, False), (True, 2, True), (False, 3, True)]
)
def test_flash_attention_on_sm90a(causal, stages, warp_specialize):
    # num_stages=1 loads Q/K/V with plain stores: the wgmma needs the proxy fence the
    # emulator checks for (its absence gave wrong results on an H100)
    b, h, s, d = 1, 2, 256, 64
    func = flash_attention_kernel(b, h, s, d, causal, "float16", block_M=64, block_N=64, num_stages=stages)
    kernel = tilelang.compile(func, out_idx=[-1], target=sm90(warp_specialize))
    source = kernel.get_kernel_source("cuda")
    assert "tile_wgmma_m64n64k16_rs_f16_f32" in source
    # warp-specialized: a producer warpgroup loads K and V as 4-D TMA tiles; the causal
    # loop bound it needs is computed in the consumer branch, so it takes the value
    assert ("tile_tma_load_4d" in source) == warp_specialize
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    got = kernel(q, k, v).astype(np.float32)
    np.testing.assert_allclose(got, sdpa(q, k, v, causal), rtol=5e-3, atol=5e-3)


def test_flash_attention_example_with_a_shared_epilogue_warp_specialized():
    # examples/flash_attention.py stores O through shared memory after the loop: the barrier
    # between those stores and the copy out lies in the consumer branch, where TVM's
    # ThreadSync cannot insert it; the split places it (a named barrier over the consumers)
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "examples" / "flash_attention.py"
    example = runpy.run_path(str(script), run_name="tile_example")
    factory = getattr(example["flashattn"], "factory", example["flashattn"])
    b, h, s, d = 1, 2, 200, 64
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    for causal in (False, True):
        kernel = tilelang.compile(factory(b, h, s, d, causal), out_idx=[3], target=sm90(True))
        source = kernel.get_kernel_source("cuda")
        assert "tile_tma_load_4d" in source and "tile_named_barrier_sync((uint)1, (uint)128)" in source
        got = kernel(q, k, v).astype(np.float32)
        np.testing.assert_allclose(got, sdpa(q, k, v, causal), rtol=5e-3, atol=5e-3)


def ws_gemm_shared_epilogue(n: int, bm: int, bn: int) -> Any:
    """A warp-specialized GEMM whose epilogue stores C through shared memory with plain stores."""
    import tile.lang.language as T

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float16")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(n, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, 32), "float16")
            B_s = T.alloc_shared((32, bn), "float16")
            C_s = T.alloc_shared((bm, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(n, 32), num_stages=2):
                T.copy(A[by * bm, k * 32], A_s)
                T.copy(B[k * 32, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(bm, bn):
                C_s[i, j] = C_f[i, j]
            T.copy(C_s, C[by * bm, bx * bn])

    return main


def test_consumer_barrier_before_the_shared_epilogue_is_needed(monkeypatch):
    # The barrier ThreadSync placed (inside the consumer branch, as a named barrier over
    # the 128 consumer threads) between the epilogue's stores of C to shared memory and the
    # copy out: without it the instrumented emulator reports the race
    from tile.backends.cpu.simt import SimtRaceError

    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    n = 128
    binary = tilelang.compile(ws_gemm_shared_epilogue(n, 64, 64), target=sm90(True)).artifact.payload
    assert "tile_tma_load_2d" in binary.source
    barrier = "tile_named_barrier_sync((uint)1, (uint)128);"
    barriers = [m.start() for m in re.finditer(re.escape(barrier), binary.source)]
    assert barriers, "the epilogue's barrier moved in the generated source"
    last = barriers[-1]  # after the stores of C to shared memory, before the copy to global
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    out = np.zeros((n, n), np.float16)
    EmulatedCudaKernel(binary.source, binary.recipe, binary.params)(a, b, out)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-3, atol=2e-2)
    mutant = binary.source[:last] + binary.source[last:].replace(barrier, "", 1)
    with pytest.raises(SimtRaceError, match="race on shared memory"):
        EmulatedCudaKernel(mutant, binary.recipe, binary.params)(a, b, np.zeros((n, n), np.float16))


def test_epilogue_through_shared_stores_with_stmatrix_on_sm90a():
    # T.copy(C_f, C_s) from the wgmma accumulator into a 16-bit shared tile: stmatrix.x4,
    # with the float32 accumulator converted when packed; sm_80 has no stmatrix
    from test_cuda_ldmatrix_banks import epilogue_gemm_kernel

    n = 256
    rng = np.random.default_rng(6)
    a = rng.standard_normal((n, 64)).astype(np.float16)
    b = rng.standard_normal((64, n)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    configs = [((128, 128, 128), "sm_90a"), ((128, 256, 256), "sm_90a"), ((64, 64, 128), "sm_80")]
    for (bm, bn, threads), arch in configs:
        target = {"kind": "cuda", "arch": arch}
        compiled = tilelang.compile(epilogue_gemm_kernel(bm, bn, threads, n), out_idx=[-1], target=target)
        source = compiled.get_kernel_source("cuda")
        assert ("tile_stmatrix_x4" in source) == (arch == "sm_90a")
        np.testing.assert_allclose(compiled(a, b).astype(np.float32), want, rtol=2e-3, atol=2e-2)


def test_mla_decode_on_sm90a():
    # the score tile goes through shared memory (S_shared) into the second wgmma
    b, h, kvh, s, d, pe = 1, 64, 1, 128, 256, 64
    func = flash_mla_decode_kernel(b, h, kvh, s, d, pe, block_H=64, num_stages=2)
    kernel = tilelang.compile(func, out_idx=[-1], target=sm90())
    assert "tile_wgmma_" in kernel.get_kernel_source("cuda")
    rng = np.random.default_rng(3)
    q = rng.standard_normal((b, h, d)).astype(np.float16)
    q_pe = rng.standard_normal((b, h, pe)).astype(np.float16)
    kv = rng.standard_normal((b, s, kvh, d)).astype(np.float16)
    k_pe = rng.standard_normal((b, s, kvh, pe)).astype(np.float16)
    got = kernel(q, q_pe, kv, k_pe).astype(np.float32)
    qf = np.concatenate([q, q_pe], -1).astype(np.float32)
    kf = np.concatenate([kv, k_pe], -1).astype(np.float32)[:, :, 0]
    scores = qf @ kf.transpose(0, 2, 1) / math.sqrt(d + pe)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ kv.astype(np.float32)[:, :, 0]
    np.testing.assert_allclose(got, want, rtol=5e-3, atol=5e-3)


def test_softmax_and_rms_norm_on_sm90a():
    x = (np.random.default_rng(2).standard_normal((100, 256)) * 3).astype(np.float32)
    softmax = tilelang.compile(softmax_kernel(100, 256), out_idx=[-1], target=sm90())
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    w = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    rms = tilelang.compile(rms_norm_kernel(100, 256), out_idx=[-1], target=sm90())
    want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(rms(x, w), want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- fault injection
def _consumer_skips_full_wait(source: str) -> str:
    """The consumers read a stage without waiting for its TMA (the producer still waits)."""
    waits = re.findall(r"tile_mbarrier_wait\(\(&\(tile_mbar_ptr\[\(k % 3\)\]\)\), [^;]*\);\n", source)
    assert len(waits) == 1, "the consumer's full-barrier wait moved in the generated GEMM"
    return source.replace(waits[0], "", 1)


def _b_swizzle_64(source: str) -> str:
    """B's descriptors claim the 64B swizzle while TMA stores it with the 128B one."""
    patched, count = re.subn(r"\(uint\)4096, \(uint\)1024, 128\)", "(uint)4096, (uint)1024, 64)", source)
    assert count > 0, "B's descriptor moved in the generated GEMM"
    return patched


def _a_swizzle_32(source: str) -> str:
    """A's descriptors claim the 32B swizzle (32-byte rows) for its 64-byte swizzled rows."""
    patched, count = re.subn(r"\(uint\)16, \(uint\)512, 64\)", "(uint)16, (uint)512, 32)", source)
    assert count > 0, "A's descriptor moved in the generated GEMM"
    return patched


TMA_MUTANTS: dict[str, Callable[[str], str]] = {
    "tma_read_before_mbarrier_wait": _consumer_skips_full_wait,
    "wgmma_descriptor_wrong_swizzle_b": _b_swizzle_64,
    "wgmma_descriptor_wrong_swizzle_a": _a_swizzle_32,
}


@pytest.mark.parametrize("mutant", list(TMA_MUTANTS))
def test_broken_sm90a_gemm_is_caught(gemm_tma, mutant):
    source = TMA_MUTANTS[mutant](gemm_tma.source)
    assert source != gemm_tma.source
    try:
        got, want = run_gemm(gemm_tma, source)
    except SimtFault:
        return  # reported
    assert not np.allclose(got, want, rtol=2e-3, atol=2e-2), f"{mutant} went unnoticed"


def test_wgmma_operand_stored_without_proxy_fence_is_reported():
    func = flash_attention_kernel(1, 1, 128, 64, False, "float16", block_M=64, block_N=64, num_stages=1)
    binary = tilelang.compile(func, target=sm90()).artifact.payload
    source, count = re.subn(r"tile_fence_proxy_async\(\);\n", "", binary.source)
    assert count > 0
    kernel = EmulatedCudaKernel(source, binary.recipe, binary.params)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 128, 1, 64)).astype(np.float16) for _ in range(3))
    with pytest.raises(SimtMisuseError, match=r"fence\.proxy\.async"):
        kernel(q, k, v, np.zeros_like(q))
