"""Turing (sm_75: T4, RTX 20xx): ``T.gemm`` on its tensor cores, everything else as on sm_80.

tile had no capability row for sm_75 ("tile has no capability table for CUDA arch sm_75"),
so a T4 could not run any kernel; TileLang targets it. Turing has ``ldmatrix`` and the
mma.sync forms ``m16n8k8 .f16`` and ``m8n8k16 .s8/.u8``, but no ``cp.async``, mbarrier,
bfloat16 or tf32 tensor cores. tile keeps the sm_80 fragments and its header issues each
``m16n8k16`` f16 mma as two ``m16n8k8`` and each ``m16n8k32`` int8 mma as four ``m8n8k16``
over the same registers; bfloat16 and float32 ``T.gemm`` run on FMA.

Compiled with nvcc for sm_75 (the SASS holds Turing's HMMA.1688 / IMMA.8816, no LDGSTS) and
run on the CPU emulator against numpy (small integers: every product and sum is exact).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from _cuda_sass import HAVE_TOOLS, SKIP_REASON

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

TURING = {"kind": "cuda", "arch": "sm_75"}
M = N = K = 128


def gemm(dtype: str, accum: str) -> Any:
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            A_shared = T.alloc_shared((64, 32), dtype)
            B_shared = T.alloc_shared((32, 64), dtype)
            C_local = T.alloc_fragment((64, 64), accum)
            T.clear(C_local)
            for ko in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 64, ko * 32], A_shared)
                T.copy(B[ko * 32, bx * 64], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 64, bx * 64])

    return main


@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
@pytest.mark.parametrize(
    ("dtype", "accum", "instruction"),
    [
        ("float16", "float32", "HMMA.1688.F32"),
        ("float16", "float16", "HMMA.1688.F16"),
        ("int8", "int32", "IMMA.8816.S8.S8"),
        ("uint8", "int32", "IMMA.8816.U8.U8"),
    ],
)
def test_gemm_runs_on_turings_tensor_cores(dtype: str, accum: str, instruction: str, monkeypatch) -> None:
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    kernel = tilelang.compile(gemm(dtype, accum), target=TURING)
    sass = kernel.get_kernel_source("sass")
    assert instruction in sass
    assert re.search(r"\bLDSM\.16\.M", sass)  # ldmatrix (sm_75+)
    assert "LDGSTS" not in sass  # no cp.async before sm_80
    stats = kernel.artifact.payload.stats
    assert stats.spill_stores == 0 and stats.spill_loads == 0


@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
def test_bfloat16_gemm_runs_on_fma(monkeypatch) -> None:
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    sass = tilelang.compile(gemm("bfloat16", "float32"), target=TURING).get_kernel_source("sass")
    assert "HMMA" not in sass and "FFMA" in sass


def _operands(dtype: str) -> tuple[Any, Any, np.ndarray]:
    rng = np.random.default_rng(11)
    a = rng.integers(-4, 5, (M, K))
    b = rng.integers(-4, 5, (K, N))
    if dtype == "uint8":
        a, b = a + 4, b + 4
    want = a @ b
    if dtype == "bfloat16":
        import torch

        return torch.tensor(a, dtype=torch.bfloat16), torch.tensor(b, dtype=torch.bfloat16), want
    return a.astype(dtype), b.astype(dtype), want


@needs_host_cxx
@pytest.mark.emu
@pytest.mark.parametrize(
    ("dtype", "accum"),
    [("float16", "float32"), ("float16", "float16"), ("int8", "int32"), ("uint8", "int32"),
     ("bfloat16", "float32"), ("float32", "float32")],
)  # fmt: skip
def test_gemm_matches_numpy_on_the_emulator(dtype: str, accum: str, monkeypatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(gemm(dtype, accum), out_idx=[2], target=TURING)
    a, b, want = _operands(dtype)
    got = np.asarray(kernel(a, b))
    np.testing.assert_array_equal(got.astype(np.int64), want)


@needs_host_cxx
@pytest.mark.emu
def test_bfloat16_stays_bfloat16_on_turing(monkeypatch) -> None:
    # TVM stores bfloat16 as uint16 and computes in float32 below sm_80 (its BF16 legalize
    # passes); the device header's bfloat16 overloads then met uint16 arguments: an atomic max
    # over blocks did not compile and casts came back NaN. tile keeps __nv_bfloat16, which
    # CUDA computes in software on sm_75.
    import torch

    monkeypatch.setenv("TILE_DEVICE", "emu")
    rows, cols = 8, 64

    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Peak: T.Tensor((cols,), "bfloat16"),
             Cast: T.Tensor((rows, cols), "bfloat16")):  # fmt: skip
        with T.Kernel(rows, threads=64) as bx:
            for j in T.Parallel(cols):
                Cast[bx, j] = T.cast(X[bx, j], "bfloat16")
                T.atomic_max(Peak[j], T.cast(X[bx, j], "bfloat16"))

    kernel = tilelang.compile(main, target=TURING)
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32) * 100
    x[0, :4] = [np.nan, -0.0, np.inf, 1.00390625]  # 1 + 2**-8: a tie, to even (1.0)
    peak = torch.full((cols,), -float("inf"), dtype=torch.bfloat16)
    cast = torch.zeros((rows, cols), dtype=torch.bfloat16)
    kernel(torch.from_numpy(x), peak, cast)
    want = torch.from_numpy(x).to(torch.bfloat16)  # round to nearest even
    bits, want_bits = cast.view(torch.int16).numpy(), want.view(torch.int16).numpy()
    np.testing.assert_array_equal(bits[:, 1:], want_bits[:, 1:])
    assert torch.isnan(cast[0, 0])
    np.testing.assert_array_equal(peak.float().numpy()[1:], want.float().numpy()[:, 1:].max(axis=0))


# PTX ISA, "Matrix Fragments for mma.m16n8k8" (.f16) and "for mma.m8n8k16" (.s8/.u8): the
# Turing instructions' own fragments, element i of lane (g = lane // 4, t = lane % 4)
def _k8_a(lane: int, i: int) -> tuple[int, int]:
    return lane // 4 + 8 * (i >> 1), 2 * (lane % 4) + (i & 1)


def _k8_b(lane: int, i: int) -> tuple[int, int]:
    return 2 * (lane % 4) + i, lane // 4


def _m8n8k16_a(lane: int, i: int) -> tuple[int, int]:
    return lane // 4, 4 * (lane % 4) + i


def _m8n8k16_b(lane: int, i: int) -> tuple[int, int]:
    return 4 * (lane % 4) + i, lane // 4


def _m8n8_c(lane: int, i: int) -> tuple[int, int]:
    return lane // 4, 2 * (lane % 4) + i


def test_the_header_splits_each_mma_into_its_operands_k_and_row_pieces() -> None:
    # tile_cuda/mma.h on sm_75: m16n8k16 f16 = m16n8k8(A regs 0-1, B reg 0) + m16n8k8(A regs
    # 2-3, B reg 1); m16n8k32 s8 = m8n8k16(A reg h + 2q, B reg q) into C regs 2h, 2h + 1. Checked
    # against the sm_80 fragments of the ISA tables: each piece is exactly the operand block the
    # smaller instruction multiplies, so the sum is the product.
    from tile.testsupport import isa_tables as isa

    rng = np.random.default_rng(9)
    a, b = rng.integers(-9, 9, (16, 16)), rng.integers(-9, 9, (16, 8))
    for half in (0, 1):  # the two m16n8k8 issued for one m16n8k16
        a_piece, b_piece = np.zeros((16, 8), int), np.zeros((8, 8), int)
        for lane in range(32):
            regs_a = [a[isa.mma_m16n8k16_f16_a(lane, e)] for e in range(8)]  # 4 regs x 2 halves
            regs_b = [b[isa.mma_m16n8k16_f16_b(lane, e)] for e in range(4)]  # 2 regs x 2 halves
            k8_a = regs_a[4 * half : 4 * half + 4]  # A regs 2*half, 2*half + 1
            k8_b = regs_b[2 * half : 2 * half + 2]  # B reg half
            for i in range(4):
                a_piece[_k8_a(lane, i)] = k8_a[i]
            for i in range(2):
                b_piece[_k8_b(lane, i)] = k8_b[i]
        np.testing.assert_array_equal(a_piece, a[:, 8 * half : 8 * half + 8])
        np.testing.assert_array_equal(b_piece, b[8 * half : 8 * half + 8, :])

    a, b = rng.integers(-9, 9, (16, 32)), rng.integers(-9, 9, (32, 8))
    for h in (0, 1):
        for q in (0, 1):
            a_piece, b_piece = np.zeros((8, 16), int), np.zeros((16, 8), int)
            c_rows = set()
            for lane in range(32):
                regs_a = [[a[isa.mma_m16n8k32_s8_a(lane, 4 * r + j)] for j in range(4)] for r in range(4)]
                regs_b = [[b[isa.mma_m16n8k32_s8_b(lane, 4 * r + j)] for j in range(4)] for r in range(2)]
                for i in range(4):
                    a_piece[_m8n8k16_a(lane, i)] = regs_a[h + 2 * q][i]
                    b_piece[_m8n8k16_b(lane, i)] = regs_b[q][i]
                for i in range(2):  # accumulator reg 2h + i of the m16n8 tile is m8n8's c_i
                    row, col = isa.mma_m16n8_c(lane, 2 * h + i)
                    assert (row - 8 * h, col) == _m8n8_c(lane, i)
                    c_rows.add(row)
            np.testing.assert_array_equal(a_piece, a[8 * h : 8 * h + 8, 16 * q : 16 * q + 16])
            np.testing.assert_array_equal(b_piece, b[16 * q : 16 * q + 16, :])
            assert c_rows == set(range(8 * h, 8 * h + 8))
