"""Global -> LDS copies on LDS DMA (``tile::lds_dma_dword``, ``_src/lds_dma.py``).

Under emulation (``TILE_DEVICE=emu``) the GEMM example with swizzled shared tiles and
ragged M/N/K matches numpy with the DMA path on and off; the emulator's wrapper faults on
a wave whose lanes disagree on the LDS row base, and an off-by-one lane offset gives a
wrong product, so both fault injections fail. Compile-only: the gfx90a disassembly has
``buffer_load_dword ... lds`` after an ``m0`` write (skipped without hipcc).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.rocm._src.lds_dma import DMA_CALL, LDS_DMA_OPTION, lds_dma_enabled
from tile.ir.errors import TargetError
from tile.ir.target import Target
from tile.layout.errors import TileError
from tile.ops.gemm import matmul_kernel
from tile.testsupport.markers import needs_host_cxx

needs_host_compiler = needs_host_cxx
# M, N, K not multiples of the 64 x 64 x 32 block: the last block row/column and K tile are ragged.
RAGGED = (100, 72, 40)


def _target(lds_dma: str | None = None) -> dict[str, str]:
    target = {"kind": "hip", "mcpu": "gfx90a"}
    if lds_dma is not None:
        target[LDS_DMA_OPTION] = lds_dma
    return target


def _compiled(m: int, n: int, k: int, dtype: str, lds_dma: str | None = None) -> Any:
    return _compiled_for(m, n, k, dtype, lds_dma, os.environ.get("TILE_DEVICE", ""))


@functools.cache
def _compiled_for(m: int, n: int, k: int, dtype: str, lds_dma: str | None, _device: str) -> Any:
    func = matmul_kernel(m, n, k, dtype, block_M=64, block_N=64, block_K=32, threads=128)
    return tilelang.compile(func, out_idx=[-1], target=_target(lds_dma))


def _operands(m: int, n: int, k: int, dtype: str) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(8)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def _dma_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if f"{DMA_CALL}(" in line]


def _check(c: Any, want: Any, dtype: str) -> None:
    tol = 2e-2 if dtype == "float16" else 1e-4
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=tol, atol=tol)


def test_lds_dma_is_on_by_default_and_the_option_turns_it_off() -> None:
    assert lds_dma_enabled(Target.parse(_target()))
    assert not lds_dma_enabled(Target.parse(_target("0")))
    assert lds_dma_enabled(Target.parse({"kind": "hip", "mcpu": "gfx942", LDS_DMA_OPTION: "1"}))
    assert not lds_dma_enabled(Target.parse({"kind": "cuda", "arch": "sm_80"}))
    with pytest.raises(TargetError, match=LDS_DMA_OPTION):
        lds_dma_enabled(Target.parse(_target("maybe")))


@needs_host_compiler
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("shape", [RAGGED, (128, 128, 64)])
def test_rocm_emu_gemm_on_lds_dma_matches_numpy(
    monkeypatch: pytest.MonkeyPatch, dtype: str, shape: tuple[int, int, int]
) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    m, n, k = shape
    kernel = _compiled(m, n, k, dtype)
    lines = _dma_lines(kernel.get_kernel_source("hip"))
    assert len(lines) == 2, "A and B are both copied into LDS by DMA"
    # the shared tiles are XOR-swizzled, so the lanes' global offsets are permuted
    assert all("^" in line for line in lines)
    a, b, want = _operands(m, n, k, dtype)
    _check(kernel(a, b), want, dtype)


@needs_host_compiler
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_rocm_emu_gemm_with_lds_dma_off_keeps_the_vgpr_path(
    monkeypatch: pytest.MonkeyPatch, dtype: str
) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = _compiled(*RAGGED, dtype, "0")
    source = kernel.get_kernel_source("hip")
    assert not _dma_lines(source)
    a, b, want = _operands(*RAGGED, dtype)
    _check(kernel(a, b), want, dtype)


def _with_macro(source: str, macro: str) -> str:
    """``source`` with ``macro`` defined right after the device header's include."""
    include = '#include "tile_hip.h"'
    assert include in source
    return source.replace(include, f"{include}\n{macro}", 1)


def _emulated(kernel: Any, source: str) -> Any:
    from tile.backends.rocm._src.emulation import EmulatedHipKernel

    binary = kernel.artifact.payload
    return EmulatedHipKernel(source, binary.recipe, binary.params)


@needs_host_compiler
def test_rocm_emu_non_uniform_lds_base_is_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: lane 5 of each wave gets its own LDS row base (the hardware would use lane 0's)."""
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = _compiled(*RAGGED, "float16")
    broken = _with_macro(
        kernel.get_kernel_source("hip"),
        "#define lds_dma_dword(base, row, ...) "
        "lds_dma_dword(base, (row) + ((((int)threadIdx.x) & 63) == 5 ? 4 : 0), __VA_ARGS__)",
    )
    a, b, _ = _operands(*RAGGED, "float16")
    with pytest.raises(TileError, match="LDS row base differs"):
        _emulated(kernel, broken)(a, b, np.zeros((RAGGED[0], RAGGED[1]), np.float16))


@needs_host_compiler
def test_rocm_emu_off_by_one_lane_offset_gives_a_wrong_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: every lane loads the dword after its own (a global offset one lane off)."""
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = _compiled(*RAGGED, "float32")
    source = kernel.get_kernel_source("hip")
    broken = _with_macro(
        source, "#define lds_dma_dword(b, r, g, off, n) lds_dma_dword(b, r, g, (off) + 4, n)"
    )
    a, b, want = _operands(*RAGGED, "float32")
    good = np.zeros((RAGGED[0], RAGGED[1]), np.float32)
    _emulated(kernel, source)(a, b, good)
    _check(good, want, "float32")
    bad = np.zeros_like(good)
    _emulated(kernel, broken)(a, b, bad)
    assert np.abs(bad - want).max() > 1.0


def test_rocm_gfx90a_disassembly_has_buffer_loads_into_lds(monkeypatch: pytest.MonkeyPatch) -> None:
    from _rocm_kernels import need_compiler

    need_compiler("gfx90a")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    asm = _compiled(*RAGGED, "float16").get_kernel_source("asm").splitlines()
    loads = [i for i, line in enumerate(asm) if re.search(r"\bbuffer_load_dword\b.*\boffen lds\b", line)]
    assert loads, "no buffer_load_dword ... lds in the gfx90a code"
    m0 = [i for i, line in enumerate(asm) if re.search(r"\bs_mov_b32 m0, s\d+", line)]
    assert m0 and m0[0] < loads[0], "M0 (the LDS row base) is written before the first DMA load"
    off = _compiled(*RAGGED, "float16", "0").get_kernel_source("asm")
    assert not re.search(r"\boffen lds\b", off)
