"""MFMA register layouts against the independent ISA tables (``tile.testsupport.isa_tables``, section 9).

Two consumers of the layouts are checked: tile-layout's MFMA fragments (which the T.gemm
lowering and the accumulator layout use), and the emulator's MFMA collective, driven by a
hand-written HIP kernel whose registers are packed and unpacked with the ISA tables.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _rocm_kernels import need_compiler

from tile.layout.hardware import amd
from tile.testsupport import isa_tables as isa
from tile.testsupport.markers import needs_host_cxx

# (tile-layout fragment, isa_tables function, elements per lane, operand kind)
CASES = {
    "16x16x16_a": (amd.mfma_16x16x16_a, "mfma_16x16x16_f16_a", 4, "a"),
    "16x16x16_b": (amd.mfma_16x16x16_b, "mfma_16x16x16_f16_b", 4, "b"),
    "16x16x16_d": (amd.mfma_16x16x16_d, "mfma_16x16x16_f32_d", 4, "d"),
    "32x32x8_a": (amd.mfma_32x32x8_a, "mfma_32x32x8_f16_a", 4, "a"),
    "32x32x8_b": (amd.mfma_32x32x8_b, "mfma_32x32x8_f16_b", 4, "b"),
    "32x32x8_d": (amd.mfma_32x32x8_d, "mfma_32x32_f32_d", 16, "d"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rocm_tile_layout_mfma_fragments_match_isa_tables(name: str) -> None:
    make, table, per_lane, _ = CASES[name]
    frag = make()
    held = {}
    for coord, _rep, lane, local in frag.enumerate_threads():
        held[(lane, int(local[0]))] = tuple(coord)
    want = {(lane, v): tuple(getattr(isa, table)(lane, v)) for lane in range(64) for v in range(per_lane)}
    assert held == want


KERNEL = """#include "tile_hip.h"
extern "C" __global__ void __launch_bounds__(64) mfma_probe(half* A, half* B, float* D) {
  int lane = (int)threadIdx.x;
  alignas(16) half a[4];
  alignas(16) half b[4];
  alignas(64) float d[REGS];
  for (int v = 0; v < 4; ++v) { a[v] = A[lane * 4 + v]; b[v] = B[lane * 4 + v]; }
  for (int g = 0; g < REGS; ++g) d[g] = D[lane * REGS + g];
  WRAPPER(d, a, b);
  for (int g = 0; g < REGS; ++g) D[lane * REGS + g] = d[g];
}
"""
SHAPES = {"16x16x16": (16, 16, 16, 4, "mfma_16x16x16_f16", "mfma_16x16x16_f32_d"),
          "32x32x8": (32, 32, 8, 16, "mfma_32x32x8_f16", "mfma_32x32_f32_d")}  # fmt: skip


def _source(shape: str) -> str:
    regs = SHAPES[shape][3]
    return KERNEL.replace("REGS", str(regs)).replace("WRAPPER", f"tile_mfma_f32_{shape}_f16")


@needs_host_cxx
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rocm_emulated_mfma_computes_through_isa_layouts(shape: str) -> None:
    from tile.backends.cpu import simt
    from tile.backends.rocm.emu import DEVICE as HIP

    m, n, k, regs, ab, d_table = SHAPES[shape]
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (m, k)).astype(np.float16)
    b = rng.integers(-4, 5, (k, n)).astype(np.float16)
    c = rng.integers(-8, 9, (m, n)).astype(np.float32)
    a_regs, b_regs = np.zeros((64, 4), np.float16), np.zeros((64, 4), np.float16)
    d_regs = np.zeros((64, regs), np.float32)
    for lane in range(64):
        for v in range(4):
            a_regs[lane, v] = a[getattr(isa, ab + "_a")(lane, v)]
            b_regs[lane, v] = b[getattr(isa, ab + "_b")(lane, v)]
        for g in range(regs):
            d_regs[lane, g] = c[getattr(isa, d_table)(lane, g)]
    library = simt.kernel_library(_source(shape), "mfma_probe", HIP)
    kernel = simt.SimtKernel(library, device=HIP)
    args = [ctypes.c_void_p(x.ctypes.data) for x in (a_regs, b_regs, d_regs)]
    kernel.launch([1, 1, 1], [64, 1, 1], 0, args)
    got = np.zeros((m, n), np.float32)
    for lane in range(64):
        for g in range(regs):
            got[getattr(isa, d_table)(lane, g)] = d_regs[lane, g]
    np.testing.assert_array_equal(got, a.astype(np.float32) @ b.astype(np.float32) + c)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rocm_header_mfma_wrappers_compile_to_v_mfma(shape: str) -> None:
    from tile.backends.rocm._src.compiler import compile_code_object, disassemble

    need_compiler("gfx90a")
    code, stats = compile_code_object(_source(shape), "gfx90a", "mfma_probe")
    mnemonic = {"16x16x16": "v_mfma_f32_16x16x16f16", "32x32x8": "v_mfma_f32_32x32x8f16"}[shape]
    assert mnemonic in disassemble(code)
    assert stats.spills == 0


# The shape-generic fragments the T.gemm lowering uses (tile-layout's mfma_operand / mfma_d).
# v_mfma_i32_16x16x16i8 and v_mfma_i32_32x32x8i8 (CDNA2) place their 4 bytes per lane where the
# f16 forms place their 4 halves (AMC; IREE's table groups them with the f16 forms), so the
# f16 tables are their oracle too.
GENERIC = {
    "A 16x16x16 (f16, bf16, i8 on CDNA2)": (lambda: amd.mfma_operand("A", 16, 16), "mfma_16x16x16_f16_a", 4),
    "B 16x16x16 (f16, bf16, i8 on CDNA2)": (lambda: amd.mfma_operand("B", 16, 16), "mfma_16x16x16_f16_b", 4),
    "A 32x32x8 (f16, bf16, i8 on CDNA2)": (lambda: amd.mfma_operand("A", 32, 8), "mfma_32x32x8_f16_a", 4),
    "B 32x32x8 (f16, bf16, i8 on CDNA2)": (lambda: amd.mfma_operand("B", 32, 8), "mfma_32x32x8_f16_b", 4),
    "D 16x16 (f32, i32)": (lambda: amd.mfma_d(16), "mfma_16x16x16_f32_d", 4),
    "D 32x32 (f32, i32)": (lambda: amd.mfma_d(32), "mfma_32x32_f32_d", 16),
}


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_rocm_generic_mfma_fragments_match_isa_tables(name: str) -> None:
    make, table, per_lane = GENERIC[name]
    held = {(lane, int(local[0])): tuple(coord) for coord, _rep, lane, local in make().enumerate_threads()}
    want = {(lane, v): tuple(getattr(isa, table)(lane, v)) for lane in range(64) for v in range(per_lane)}
    assert held == want


# v_mfma_i32_16x16x32_i8 (CDNA3) is not in the ISA tables: lane l holds A[l%16][8(l/16)+v] and
# B[8(l/16)+v][l%16], v = 0..7 (IREE, iree-org/iree compiler/src/iree/compiler/Codegen/Dialect/
# GPU/IR/IREEGPUAttrs.cpp, getSingleSubgroupLayout: MFMA_I32_16x16x32_I8 = mfmaLhs16xK(32),
# thread {16, 4}, strides {1, 16}, element {1, 8}); D is the 16x16 table.
def _i8_k32_a(lane: int, v: int) -> tuple[int, int]:
    return lane % 16, 8 * (lane // 16) + v


def _i8_k32_b(lane: int, v: int) -> tuple[int, int]:
    return 8 * (lane // 16) + v, lane % 16


I8_KERNEL = """#include "tile_hip.h"
extern "C" __global__ void __launch_bounds__(64) mfma_i8_probe(signed char* A, signed char* B, int* D) {
  int lane = (int)threadIdx.x;
  signed char a[PER_LANE];
  signed char b[PER_LANE];
  alignas(16) int d[4];
  for (int v = 0; v < PER_LANE; ++v) { a[v] = A[lane * PER_LANE + v]; b[v] = B[lane * PER_LANE + v]; }
  for (int g = 0; g < 4; ++g) d[g] = D[lane * 4 + g];
  WRAPPER(d, a, b);
  for (int g = 0; g < 4; ++g) D[lane * 4 + g] = d[g];
}
"""
# name -> (K, bytes per lane, wrapper, A table, B table)
I8_SHAPES = {
    "16x16x16i8": (16, 4, "tile_mfma_i32_16x16x16_i8", "mfma_16x16x16_f16_a", "mfma_16x16x16_f16_b"),
    "16x16x32_i8": (32, 8, "tile_mfma_i32_16x16x32_i8", _i8_k32_a, _i8_k32_b),
}


def _i8_source(name: str) -> str:
    _k, per_lane, wrapper, _a, _b = I8_SHAPES[name]
    return I8_KERNEL.replace("PER_LANE", str(per_lane)).replace("WRAPPER", wrapper)


def _table(entry: object) -> object:
    return getattr(isa, entry) if isinstance(entry, str) else entry


@needs_host_cxx
@pytest.mark.parametrize("name", sorted(I8_SHAPES))
def test_rocm_emulated_int8_mfma_computes_through_isa_layouts(name: str) -> None:
    from tile.backends.cpu import simt
    from tile.backends.rocm.emu import DEVICE as HIP

    k, per_lane, _wrapper, a_entry, b_entry = I8_SHAPES[name]
    a_at, b_at, d_at = _table(a_entry), _table(b_entry), isa.mfma_16x16x16_f32_d
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (16, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, 16)).astype(np.int8)
    c = rng.integers(-1000, 1000, (16, 16)).astype(np.int32)
    a_regs, b_regs = np.zeros((64, per_lane), np.int8), np.zeros((64, per_lane), np.int8)
    d_regs = np.zeros((64, 4), np.int32)
    for lane in range(64):
        for v in range(per_lane):
            a_regs[lane, v] = a[a_at(lane, v)]  # type: ignore[operator]
            b_regs[lane, v] = b[b_at(lane, v)]  # type: ignore[operator]
        for g in range(4):
            d_regs[lane, g] = c[d_at(lane, g)]
    library = simt.kernel_library(_i8_source(name), "mfma_i8_probe", HIP)
    kernel = simt.SimtKernel(library, device=HIP)
    args = [ctypes.c_void_p(x.ctypes.data) for x in (a_regs, b_regs, d_regs)]
    kernel.launch([1, 1, 1], [64, 1, 1], 0, args)
    got = np.zeros((16, 16), np.int32)
    for lane in range(64):
        for g in range(4):
            got[d_at(lane, g)] = d_regs[lane, g]
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32) + c)


def test_rocm_header_int8_mfma_wrapper_compiles_to_v_mfma_on_gfx90a() -> None:
    from tile.backends.rocm._src.compiler import compile_code_object, disassemble

    need_compiler("gfx90a")
    code, stats = compile_code_object(_i8_source("16x16x16i8"), "gfx90a", "mfma_i8_probe")
    assert "v_mfma_i32_16x16x16i8" in disassemble(code)
    assert stats.spills == 0


def test_rocm_header_k32_int8_mfma_wrapper_compiles_where_clang_knows_gfx942() -> None:
    from tile.backends.rocm._src.compiler import compile_code_object, disassemble

    need_compiler("gfx942")
    code, _stats = compile_code_object(_i8_source("16x16x32_i8"), "gfx942", "mfma_i8_probe")
    assert "v_mfma_i32_16x16x32_i8" in disassemble(code)
