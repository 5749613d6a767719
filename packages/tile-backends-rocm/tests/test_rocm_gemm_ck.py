"""``T.gemm(..., impl="ck")``: composable_kernel's ck_tile warp gemm as the MFMA step.

* CK's lane distributions (the constants of each ``WarpGemmAttributeMfmaImpl*`` in the
  amd-aiter wheel's ``warp_gemm_attribute_mfma_impl.hpp``, read through the tile-distribution
  encodings of ``warp_gemm_attribute_mfma.hpp``) equal tile-layout's MFMA fragments;
* under ``TILE_DEVICE=emu`` impl="ck" gemms match numpy (tile's side of the path: operand loads
  and accumulator layout; the emulator stands in for CK's device code);
* built for gfx942 / gfx90a with clang++-19, the code object holds the same MFMAs as tile's own
  gemm (``tile_hip/ck.h`` static_asserts the layouts again, at compile time).

The CK parts skip without the wheel (``pip install --no-deps amd-aiter``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from _rocm_kernels import hide_hip_compilers, need_compiler, typed_gemm_kernel

import tile.lang as tilelang
from tile.backends.rocm._src.ck_headers import ck_include_dir
from tile.ir.errors import UnsupportedOnTargetError
from tile.layout.hardware import amd
from tile.testsupport.markers import needs_host_cxx

CK = ck_include_dir()
needs_ck = pytest.mark.skipif(CK is None, reason="composable_kernel headers: pip install --no-deps amd-aiter")

# CK impl struct -> (tile wrapper shape, T, K, operand dtype)
CK_IMPLS = {
    "WarpGemmAttributeMfmaImplF16F16F32M16N16K16": (16, 16),
    "WarpGemmAttributeMfmaImplF16F16F32M32N32K8": (32, 8),
    "WarpGemmAttributeMfmaImplBf16Bf16F32M16N16K16": (16, 16),
    "WarpGemmAttributeMfmaImplBf16Bf16F32M32N32K8": (32, 8),
    "WarpGemmAttributeMfmaImpl_i32_16x16x32_i8": (16, 32),
    "WarpGemmAttributeMfmaImpl_i32_32x32x16_i8": (32, 16),
}


def ck_constants(struct: str) -> dict[str, int]:
    assert CK is not None
    text = (CK / "ck_tile/ops/gemm/warp/warp_gemm_attribute_mfma_impl.hpp").read_text()
    start = text.index(f"struct {struct}\n")
    body = text[start : text.index("\n};", start)]
    return {name: int(value) for name, value in re.findall(r"index_t (k\w+)\s*=\s*(\d+);", body)}


def ck_maps(c: dict[str, int]) -> tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]:
    """(lane, value) -> element of A (m, k), B (k, n), C (m, n) under CK's encodings: A/B lane =
    kABKLane index * kMNLane + m/n, value = K within the lane; C lane = kCMLane index * kCNLane
    + n, value g = m0 * kCM1PerLane + m1, row = (m0 * kCMLane + m_lane) * kCM1PerLane + m1."""
    a = {(ln, v): (ln % c["kAMLane"], c["kABKPerLane"] * (ln // c["kAMLane"]) + v)
         for ln in range(64) for v in range(c["kABKPerLane"])}  # fmt: skip
    b = {(ln, v): (c["kABKPerLane"] * (ln // c["kBNLane"]) + v, ln % c["kBNLane"])
         for ln in range(64) for v in range(c["kABKPerLane"])}  # fmt: skip
    out = {}
    for lane in range(64):
        for m0 in range(c["kCM0PerLane"]):
            for m1 in range(c["kCM1PerLane"]):
                row = (m0 * c["kCMLane"] + lane // c["kCNLane"]) * c["kCM1PerLane"] + m1
                out[(lane, m0 * c["kCM1PerLane"] + m1)] = (row, lane % c["kCNLane"])
    return a, b, out


def tile_map(frag: Any) -> dict[Any, Any]:
    return {(lane, int(local[0])): tuple(coord) for coord, _rep, lane, local in frag.enumerate_threads()}


@needs_ck
@pytest.mark.parametrize("struct", sorted(CK_IMPLS))
def test_ck_lane_distributions_equal_tile_layouts(struct: str) -> None:
    t, k = CK_IMPLS[struct]
    constants = ck_constants(struct)
    assert (constants["kM"], constants["kN"], constants["kK"]) == (t, t, k)
    a, b, c = ck_maps(constants)
    assert a == tile_map(amd.mfma_operand("A", t, k))
    assert b == tile_map(amd.mfma_operand("B", t, k))
    assert c == tile_map(amd.mfma_d(t))


def ck_gemm(
    m: int,
    n: int,
    k: int,
    dtype: str,
    acc: str,
    block: tuple[int, int],
    threads: int,
    impl: str | None = "ck",
) -> Any:
    return typed_gemm_kernel(m, n, k, dtype, acc, block[0], block[1], 32, threads, impl)


# (arch, dtype, accumulator, block, threads, the tile_ck_* wrapper the lowering picks)
EMU_CASES = [
    ("gfx942", "float16", "float32", (64, 64), 128, "tile_ck_mfma_f32_32x32x8_f16"),
    ("gfx90a", "bfloat16", "float32", (32, 48), 64, "tile_ck_mfma_f32_16x16x16_bf16"),
    ("gfx942", "int8", "int32", (32, 48), 64, "tile_ck_mfma_i32_16x16x32_i8"),
]


@needs_host_cxx
@pytest.mark.parametrize(("arch", "dtype", "acc", "block", "threads", "wrapper"), EMU_CASES)
def test_ck_gemm_under_emulation_matches_numpy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, arch: str, dtype: str, acc: str, block: Any, threads: int,
    wrapper: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_CACHE", "0")
    hide_hip_compilers(monkeypatch, tmp_path)  # the emulator runs the source; no code object
    from tile.backends.rocm._src import backend

    backend._compiler_present.cache_clear()
    m, n, k = 64, 2 * block[1], 64
    kernel = tilelang.compile(ck_gemm(m, n, k, dtype, acc, block, threads), out_idx=[-1],
                              target={"kind": "hip", "mcpu": arch})  # fmt: skip
    backend._compiler_present.cache_clear()
    source = kernel.get_kernel_source("hip")
    assert set(re.findall(r"\btile_(?:ck_)?mfma_\w+", source)) == {wrapper}
    assert '#include "tile_hip/ck.h"' in source
    rng = np.random.default_rng(7)
    if dtype == "int8":
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8)
        np.testing.assert_array_equal(kernel(a, b), a.astype(np.int32) @ b.astype(np.int32))
        return
    import torch

    a = torch.randn(m, k, dtype=getattr(torch, dtype))
    b = torch.randn(k, n, dtype=getattr(torch, dtype))
    want = a.float().numpy() @ b.float().numpy()
    np.testing.assert_allclose(np.asarray(kernel(a, b)), want, rtol=1e-4, atol=1e-3)


def test_ck_gemm_without_a_ck_warp_gemm_is_a_typed_error() -> None:
    for arch, dtype, acc in (("gfx90a", "int8", "int32"), ("gfx942", "float32", "float32")):
        with pytest.raises(UnsupportedOnTargetError, match="impl='ck'"):
            tilelang.compile(
                ck_gemm(64, 64, 64, dtype, acc, (64, 64), 128), target={"kind": "hip", "mcpu": arch}
            )


@needs_ck
@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_ck_gemm_code_object_has_the_mfmas_of_tiles_own(monkeypatch: pytest.MonkeyPatch, arch: str) -> None:
    need_compiler(arch)
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    target = {"kind": "hip", "mcpu": arch}
    built = tilelang.compile(ck_gemm(128, 128, 64, "float16", "float32", (64, 64), 128), target=target)
    own = tilelang.compile(ck_gemm(128, 128, 64, "float16", "float32", (64, 64), 128, None), target=target)
    mnemonic = {"gfx942": "v_mfma_f32_32x32x8_f16", "gfx90a": "v_mfma_f32_32x32x8f16"}[arch]
    found = re.findall(r"\bv_mfma_\w+", built.get_kernel_source("asm"))
    # 2 waves, 64 x 32 each = 2 x 1 tiles of 32x32, 4 K=8 steps per 32-wide K tile: 8 per K
    # tile. clang keeps the CK gemm's 2-trip K loop (8) and unrolls tile's own (16).
    own_found = re.findall(r"\bv_mfma_\w+", own.get_kernel_source("asm"))
    assert set(found) == set(own_found) == {mnemonic}
    assert len(found) in (8, 16) and len(own_found) in (8, 16)
    assert "tile_ck_mfma_f32_32x32x8_f16(" in built.get_kernel_source("hip")
    stats = built.artifact.payload.stats
    assert stats.spills == 0 and stats.scratch_bytes == 0
