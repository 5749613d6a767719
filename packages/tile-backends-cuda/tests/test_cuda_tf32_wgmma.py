"""float32 ``T.gemm`` on sm_90a: tf32 ``wgmma.mma_async.m64nNk8`` when both operands are K-major.

TileLang multiplies float32 gemms on Hopper with tf32 wgmma (A stored (M, K), B stored (N, K):
``transpose_B=True``; PTX has no transposed tf32 wgmma) and keeps mma.sync's tf32 instruction
for other storages. tile did mma.sync for every float32 gemm, so a tf32 gemm and a bfloat16 one
(wgmma) feeding one ``T.Parallel`` had accumulators of different warp orders: TileLang's
examples/gdn/example_chunk_delta_bwd.py stopped with ``LayoutInferenceError: conflicting layouts``.

* Reference: numpy in float64 on the operands cut to tf32 (the top 19 bits of each float, what
  the tensor core reads, as the emulator's mma.sync tf32 does); the kernel's float32 sums are
  compared at float32 precision, which the untruncated product misses by about 1e-3.
* The register-A order is tile-layout's ``wgmma_m64k8_a`` (checked there against CUTLASS's
  ``ALayout_64x8`` and the ISA tables); the emulator reads a0..a3 in that order.
* Descriptor oracle: every element a K-major tf32 wgmma reads through tile's descriptor
  (``isa_tables.wgmma_smem_addr`` with 32-bit elements) is the one tile's layout stores there.
* nvcc + nvdisasm: the sm_90a cubin multiplies with ``HGMMA.64x128x8.F32.TF32``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from _cuda_sass import HAVE_TOOLS, SKIP_REASON

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src.hopper import operand_desc
from tile.layout import SwizzledLayout, make_swizzled_layout
from tile.testsupport import isa_tables as isa
from tile.testsupport.markers import needs_host_cxx

SM90A = {"kind": "cuda", "arch": "sm_90a"}


def tf32(x: np.ndarray) -> np.ndarray:
    """The value a tf32 tensor core reads from each float32: its top 19 bits."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def float32_gemm(
    M: int,
    N: int,
    K: int,
    block: tuple[int, int, int],
    transpose_b: bool = True,
    register_a: bool = False,
    threads: int = 128,
    stages: int = 2,
) -> Any:
    bm, bn, bk = block
    b_shape = (N, K) if transpose_b else (K, N)
    bs_shape = (bn, bk) if transpose_b else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor(b_shape, "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared(bs_shape, "float32")
            A_f = T.alloc_fragment((bm, bk), "float32")
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                if transpose_b:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                if register_a:
                    T.copy(A_s, A_f)
                    T.gemm(A_f, B_s, C_f, transpose_B=transpose_b)
                else:
                    T.gemm(A_s, B_s, C_f, transpose_B=transpose_b)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def _operands(M: int, N: int, K: int, transpose_b: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np.float32)
    return a, b


def _tf32_reference(a: np.ndarray, b: np.ndarray, transpose_b: bool) -> np.ndarray:
    bv = tf32(b).astype(np.float64)
    return tf32(a).astype(np.float64) @ (bv.T if transpose_b else bv)


def _instructions(kernel: Any) -> set[str]:
    return set(re.findall(r"tile_(?:wgmma|mma)_m\w+", kernel.get_kernel_source()))


# --------------------------------------------------------------------------- emulator
@pytest.mark.emu
@needs_host_cxx
@pytest.mark.parametrize(
    ("register_a", "threads", "wrapper"),
    [
        (False, 128, "tile_wgmma_m64n64k8_ss_tf32_f32"),
        (True, 128, "tile_wgmma_m64n64k8_rs_tf32_f32"),
        (False, 256, "tile_wgmma_m64n64k8_ss_tf32_f32"),  # two warpgroups split M
    ],
)
def test_k_major_float32_gemm_runs_on_tf32_wgmma(
    monkeypatch, register_a: bool, threads: int, wrapper: str
) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    M, N, K = 128, 128, 96  # three K tiles of 32: the pipeline's steady state and its drain
    kernel = tilelang.compile(
        float32_gemm(M, N, K, (128, 64, 32), register_a=register_a, threads=threads),
        out_idx=[-1],
        target=SM90A,
    )
    assert _instructions(kernel) == {wrapper}
    a, b = _operands(M, N, K, True, seed=3)
    c = np.asarray(kernel(a, b))
    want = _tf32_reference(a, b, True)
    scale = np.abs(want).max()
    np.testing.assert_allclose(c, want, rtol=0, atol=2e-6 * scale)
    # the operands were cut to tf32: the full float32 product is off by far more than float32 sums
    full = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.abs(c - full).max() > 1e-4 * scale


@pytest.mark.emu
@needs_host_cxx
def test_float32_gemm_with_b_stored_k_by_n_keeps_mma_sync(monkeypatch) -> None:
    # no transposed tf32 wgmma exists: the gemm takes mma.sync's tf32 layouts from the start
    monkeypatch.setenv("TILE_DEVICE", "emu")
    M, N, K = 64, 64, 64
    kernel = tilelang.compile(
        float32_gemm(M, N, K, (64, 64, 32), transpose_b=False), out_idx=[-1], target=SM90A
    )
    assert _instructions(kernel) == {"tile_mma_m16n8k8_tf32_f32"}
    a, b = _operands(M, N, K, False, seed=4)
    want = _tf32_reference(a, b, False)
    np.testing.assert_allclose(np.asarray(kernel(a, b)), want, rtol=0, atol=2e-6 * np.abs(want).max())


@T.prim_func
def _tf32_and_bf16_into_one_sum(
    Qt: T.Tensor((64, 64), "float32"),  # (DK, S): the tf32 gemm's A, read from registers
    dO_t: T.Tensor((32, 64), "float32"),  # (DV, S): its B, stored (N, K)
    Wt: T.Tensor((64, 64), "bfloat16"),  # (S, DK): the bf16 gemm's A, stored (K, M)
    dv: T.Tensor((64, 32), "bfloat16"),  # (S, DV)
    Out: T.Tensor((64, 32), "float32"),
):
    # the shape of gdn's chunk_delta_bwd update: dh += Q^T dO (tf32) - W^T dv (bf16)
    with T.Kernel(1, threads=128):
        q_f = T.alloc_fragment((64, 64), "float32")
        do_s = T.alloc_shared((32, 64), "float32")
        w_s = T.alloc_shared((64, 64), "bfloat16")
        dv_s = T.alloc_shared((64, 32), "bfloat16")
        acc1 = T.alloc_fragment((64, 32), "float32")
        acc2 = T.alloc_fragment((64, 32), "float32")
        acc = T.alloc_fragment((64, 32), "float32")
        T.copy(Qt, q_f)
        T.copy(dO_t, do_s)
        T.copy(Wt, w_s)
        T.copy(dv, dv_s)
        T.clear(acc)
        T.clear(acc1)
        T.gemm(q_f, do_s, acc1, transpose_B=True)
        T.clear(acc2)
        T.gemm(w_s, dv_s, acc2, transpose_A=True)
        for i, j in T.Parallel(64, 32):
            acc[i, j] += acc1[i, j] - acc2[i, j]
        T.copy(acc, Out)


@pytest.mark.emu
@needs_host_cxx
def test_tf32_and_bf16_gemms_feeding_one_parallel_loop(monkeypatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(_tf32_and_bf16_into_one_sum, out_idx=[-1], target=SM90A)
    assert _instructions(kernel) == {"tile_wgmma_m64n32k8_rs_tf32_f32", "tile_wgmma_m64n32k16_ss_bf16_f32"}
    rng = np.random.default_rng(9)
    qt = rng.standard_normal((64, 64)).astype(np.float32)
    do_t = rng.standard_normal((32, 64)).astype(np.float32)
    wt = torch.from_numpy(rng.standard_normal((64, 64)).astype(np.float32)).to(torch.bfloat16)
    dv = torch.from_numpy(rng.standard_normal((64, 32)).astype(np.float32)).to(torch.bfloat16)
    out = np.asarray(kernel(torch.from_numpy(qt), torch.from_numpy(do_t), wt, dv))
    w64, dv64 = wt.to(torch.float64).numpy(), dv.to(torch.float64).numpy()
    want = tf32(qt).astype(np.float64) @ tf32(do_t).astype(np.float64).T - w64.T @ dv64
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-6 * np.abs(want).max())


@pytest.mark.emu
@needs_host_cxx
@pytest.mark.parametrize(
    ("threads", "block", "register_a"), [(128, (128, 64), True), (256, (128, 128), False)]
)
def test_mn_major_float32_gemm_keeps_the_warpgroup_layout_on_mma_sync(
    monkeypatch, threads: int, block: tuple[int, int], register_a: bool
) -> None:
    # B stored (K, N): mma.sync's tf32 instruction, each warp's m16 tiles 64 rows apart (the
    # wgmma accumulator's order), one or two warpgroups, A from shared memory or registers
    monkeypatch.setenv("TILE_DEVICE", "emu")
    M, N, K = 256, 256, 64
    func = float32_gemm(M, N, K, (*block, 32), transpose_b=False, register_a=register_a, threads=threads)
    kernel = tilelang.compile(func, out_idx=[-1], target=SM90A)
    assert _instructions(kernel) == {"tile_mma_m16n8k8_tf32_f32"}
    a, b = _operands(M, N, K, False, seed=6)
    want = _tf32_reference(a, b, False)
    np.testing.assert_allclose(np.asarray(kernel(a, b)), want, rtol=0, atol=2e-6 * np.abs(want).max())


@pytest.mark.emu
@needs_host_cxx
def test_float32_flash_attention_on_sm90a(monkeypatch) -> None:
    # Q K^T on tf32 wgmma, P V on mma.sync (V is MN-major) in one online softmax: it was refused
    # ("conflicting layouts for buffer scores_scale") once Q K^T took wgmma. Same values as the
    # sm_80 build (mma.sync only), and the softmax in float64 within tf32's error.
    from tile.ops.attention import flash_attention_kernel

    monkeypatch.setenv("TILE_DEVICE", "emu")
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 128, 2, 32)).astype(np.float32) for _ in range(3))
    outputs = {}
    for arch in ("sm_90a", "sm_80"):
        func = flash_attention_kernel(1, 2, 128, 32, False, "float32", block_M=128, block_N=64, threads=128)
        kernel = tilelang.compile(func, out_idx=[-1], target={"kind": "cuda", "arch": arch})
        outputs[arch] = np.asarray(kernel(q, k, v))
    scores = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(32)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    np.testing.assert_allclose(outputs["sm_90a"], outputs["sm_80"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(outputs["sm_90a"], want, rtol=0, atol=5e-3)


# --------------------------------------------------------------------------- descriptor oracle
@pytest.mark.parametrize("shape", [(64, 8), (64, 16), (64, 32)])  # 32B, 64B, 128B swizzles
def test_tf32_descriptor_reads_what_the_layout_stores(shape: tuple[int, int]) -> None:
    layout = make_swizzled_layout(list(shape), "float32")
    assert isinstance(layout, SwizzledLayout)
    rows, cols = shape
    desc = operand_desc(layout, rows, True)
    width = int(layout.get_output_shape()[-1])

    def byte(row: int, col: int) -> int:  # where the layout stores element (row, col), in bytes
        out = [int(e) for e in layout.map_forward_index([row, col])]
        return 4 * (out[0] * width + out[1])

    for k0 in range(0, cols, 8):  # one k8 instruction per 32 bytes of K
        start = byte(0, k0)
        for mn in range(64):
            for k in range(8):
                read = isa.wgmma_smem_addr(
                    start, "K", desc.swizzle_bytes, mn, k, 32, desc.lbo_bytes, desc.sbo_bytes
                )
                assert read == byte(mn, k0 + k), (k0, mn, k)


# --------------------------------------------------------------------------- compile (nvcc)
@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
@pytest.mark.parametrize("register_a", [False, True])
def test_sm90a_float32_gemm_runs_on_tf32_hgmma(register_a: bool) -> None:
    kernel = tilelang.compile(
        float32_gemm(256, 256, 256, (128, 128, 32), register_a=register_a, threads=256, stages=3),
        target=SM90A,
    )
    binary = kernel.artifact.payload
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    sass = binary.sass()
    assert re.search(r"\bHGMMA\.64x128x8\.F32\.TF32\b", sass), "no tf32 wgmma"
    assert not re.search(r"\bHMMA\b", sass), "a K-major float32 gemm on sm_90a fell back to mma.sync"
