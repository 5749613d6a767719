"""MFMA register layouts against the independent ISA tables (shared/docs/isa_tables.py, section 9).

Two consumers of the layouts are checked: tile-layout's MFMA fragments (which the T.gemm
lowering and the accumulator layout use), and the emulator's MFMA collective, driven by a
hand-written HIP kernel whose registers are packed and unpacked with the ISA tables.
"""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tile.layout.hardware import amd

ISA_TABLES = Path(__file__).resolve().parents[3].parent / "shared" / "docs" / "isa_tables.py"


def _load_isa() -> ModuleType | None:
    if not ISA_TABLES.exists():
        return None
    spec = importlib.util.spec_from_file_location("isa_tables_rocm_reference", ISA_TABLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


isa = _load_isa()
pytestmark = pytest.mark.skipif(isa is None, reason=f"the ISA oracle {ISA_TABLES} is not here")

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


@pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler")
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rocm_emulated_mfma_computes_through_isa_layouts(shape: str) -> None:
    from tile.backends.cpu import simt

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
    library = simt.kernel_library(_source(shape), "mfma_probe", "tile_hip.h")
    kernel = simt.SimtKernel(library, warp_size=64)
    args = [ctypes.c_void_p(x.ctypes.data) for x in (a_regs, b_regs, d_regs)]
    kernel.launch([1, 1, 1], [64, 1, 1], 0, args)
    got = np.zeros((m, n), np.float32)
    for lane in range(64):
        for g in range(regs):
            got[getattr(isa, d_table)(lane, g)] = d_regs[lane, g]
    np.testing.assert_array_equal(got, a.astype(np.float32) @ b.astype(np.float32) + c)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rocm_header_mfma_wrappers_compile_to_v_mfma(shape: str) -> None:
    from tile.backends.rocm import probe_hipcc
    from tile.backends.rocm._src.compiler import compile_code_object, disassemble, hipcc_supports

    if probe_hipcc() is None or not hipcc_supports("gfx90a")[0]:
        pytest.skip("hipcc for gfx90a not found (apt-get install hipcc)")
    code, stats = compile_code_object(_source(shape), "gfx90a", "mfma_probe")
    mnemonic = {"16x16x16": "v_mfma_f32_16x16x16f16", "32x32x8": "v_mfma_f32_32x32x8f16"}[shape]
    assert mnemonic in disassemble(code)
    assert stats.spills == 0
