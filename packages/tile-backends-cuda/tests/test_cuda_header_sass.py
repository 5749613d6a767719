"""Each tile_cuda/*.h wrapper compiles (nvcc -cubin) to the instruction it promises.

One small kernel per wrapper (tests/cuda_kernels/header_<arch>.cu, e.g. header_sm_80.cu); the SASS of
that kernel must contain the expected opcode. Skips without nvcc or nvdisasm.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _cuda_sass import HAVE_TOOLS, SKIP_REASON, compile_cubin, opcodes, sass_by_kernel

pytestmark = pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)

KERNELS = Path(__file__).parent / "cuda_kernels"


def _sass(arch: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    work = tmp_path_factory.mktemp(arch)
    source = (KERNELS / f"header_{arch}.cu").read_text()
    return sass_by_kernel(compile_cubin(source, arch, work, (f"-I{KERNELS}",)))


@pytest.fixture(scope="module")
def sass_sm80(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _sass("sm_80", tmp_path_factory)


@pytest.fixture(scope="module")
def sass_sm89(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _sass("sm_89", tmp_path_factory)


@pytest.fixture(scope="module")
def sass_sm90a(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _sass("sm_90a", tmp_path_factory)


SM80 = {
    "k_mma_f16_f32": ["HMMA.16816.F32"],
    "k_mma_bf16_f32": ["HMMA.16816.F32.BF16"],
    "k_mma_f16_f16": ["HMMA.16816.F16"],
    "k_mma_s8_s32": ["IMMA.16832.S8.S8"],
    "k_mma_u8_s32": ["IMMA.16832.U8.U8"],
    "k_mma_tf32_f32": ["HMMA.1688.F32.TF32"],
    "k_mma_f64": ["DMMA.884"],  # two m8n8k4 f64
    "k_ldsm_x1": ["LDSM.16.M88"],
    "k_ldsm_x2": ["LDSM.16.M88.2"],
    "k_ldsm_x4": ["LDSM.16.M88.4"],
    "k_ldsm_x1_trans": ["LDSM.16.MT88"],
    "k_ldsm_x2_trans": ["LDSM.16.MT88.2"],
    "k_ldsm_x4_trans": ["LDSM.16.MT88.4"],
    "k_cp_async_4": ["LDGSTS.E", "LDGDEPBAR", "DEPBAR.LE"],
    "k_cp_async_8": ["LDGSTS.E.64", "LDGDEPBAR", "DEPBAR.LE"],
    "k_cp_async_16": ["LDGSTS.E.BYPASS.128", "LDGDEPBAR", "DEPBAR.LE"],
    "k_cp_async_zfill_4": ["LDGSTS.E"],
    "k_cp_async_zfill_8": ["LDGSTS.E.64"],
    "k_cp_async_zfill_16": ["LDGSTS.E.BYPASS.128"],
}
SM89 = {
    "k_mma_e4m3_f32": ["QMMA.16832.F32.E4M3.E4M3"],
    "k_mma_e5m2_f32": ["QMMA.16832.F32.E5M2.E5M2"],
}
SM90A = {
    "k_wgmma_ss_f16_n8": ["WARPGROUP.ARRIVE", "HGMMA.64x8x16.F32", "WARPGROUP.DEPBAR.LE"],
    "k_wgmma_ss_f16_n64": ["HGMMA.64x64x16.F32"],
    "k_wgmma_ss_f16_n128": ["HGMMA.64x128x16.F32"],
    "k_wgmma_ss_bf16_n256": ["HGMMA.64x256x16.F32.BF16"],
    "k_wgmma_rs_f16_n128": ["HGMMA.64x128x16.F32"],
    "k_wgmma_rs_bf16_n64": ["HGMMA.64x64x16.F32.BF16"],
    "k_wgmma_ss_e4m3_n128": ["QGMMA.64x128x32.F32.E4M3.E4M3"],
    "k_wgmma_ss_e5m2_n64": ["QGMMA.64x64x32.F32.E5M2.E5M2"],
    "k_wgmma_ss_e4m3_n256": ["QGMMA.64x256x32.F32.E4M3.E4M3"],
    "k_tma_mbarrier": [
        "UTMACCTL.PF", "SYNCS.EXCH.64", "FENCE.VIEW.ASYNC.S", "SYNCS.ARRIVE.TRANS64",
        "UTMALDG.2D", "SYNCS.PHASECHK.TRANS64.TRYWAIT",
    ],
    "k_mbarrier_arrive": ["SYNCS.ARRIVE.TRANS64.A1T0", "SYNCS.PHASECHK.TRANS64.TRYWAIT"],
    "k_stmatrix": ["STSM.16.M88", "STSM.16.M88.2", "STSM.16.M88.4", "STSM.16.MT88.4"],
    "k_setmaxnreg": ["USETMAXREG.TRY_ALLOC.CTAPOOL", "USETMAXREG.DEALLOC.CTAPOOL"],
}  # fmt: skip


def _check(sass: dict[str, str], kernel: str, expected: list[str]) -> None:
    assert kernel in sass, f"{kernel} missing from the cubin ({sorted(sass)})"
    found = opcodes(sass[kernel])
    for opcode in expected:
        assert opcode in found, f"{kernel}: no {opcode} in {found}"


@pytest.mark.parametrize("kernel", sorted(SM80))
def test_sm80_wrapper_emits(sass_sm80: dict[str, str], kernel: str) -> None:
    _check(sass_sm80, kernel, SM80[kernel])


@pytest.mark.parametrize("kernel", sorted(SM89))
def test_sm89_fp8_mma_emits(sass_sm89: dict[str, str], kernel: str) -> None:
    _check(sass_sm89, kernel, SM89[kernel])


@pytest.mark.parametrize("kernel", sorted(SM90A))
def test_sm90a_wrapper_emits(sass_sm90a: dict[str, str], kernel: str) -> None:
    _check(sass_sm90a, kernel, SM90A[kernel])


def test_sm80_plain_copies_are_unpredicated_and_zfill_copies_predicated(sass_sm80: dict[str, str]) -> None:
    # src-size 0 for a lane out of bounds becomes LDGSTS's ignore-source predicate.
    def ldgsts_lines(kernel: str) -> list[str]:
        return [line for line in sass_sm80[kernel].splitlines() if "LDGSTS" in line]

    for size in (4, 8, 16):
        assert all(not re.search(r",\s*!?P\d\s*;", line) for line in ldgsts_lines(f"k_cp_async_{size}"))
        zfill = ldgsts_lines(f"k_cp_async_zfill_{size}")
        assert zfill and all(re.search(r",\s*!?P\d\s*;", line) for line in zfill), zfill


def test_sm80_wait_group_keeps_the_newest_group_pending(sass_sm80: dict[str, str]) -> None:
    waits = re.findall(r"DEPBAR\.LE\s+SB0,\s*(0x[0-9a-f]+)", sass_sm80["k_cp_async_wait_1"])
    assert waits == ["0x1", "0x0"], waits


def test_hopper_header_compiles_for_sm80_when_unused(tmp_path: Path) -> None:
    # The root header includes every sub-header for every arch; unused sm_90a
    # wrappers must not break an sm_80 build.
    source = (
        '#include "tile_cuda/mma.h"\n#include "tile_cuda/ldmatrix.h"\n'
        '#include "tile_cuda/async.h"\n#include "tile_cuda/hopper.h"\n'
        'extern "C" __global__ void k(float* o) { o[threadIdx.x] = 1.f; }\n'
    )
    assert "k" in sass_by_kernel(compile_cubin(source, "sm_80", tmp_path))
