"""gfx942 (MI300) and gfx90a (MI200) code objects, checked by disassembly.

Each kernel is built by the compiler ``select_hip_compiler`` picks (clang++-19 with lld
here: ``apt-get install clang-19 lld-19``; Debian's hipcc, clang 15, knows no gfx942), and
its code object is read back:

* the MFMA instructions in ``llvm-objdump -d`` are exactly the one the HIP source's wrapper
  stands for on that arch, looked up in the arch's instruction table
  (``tile.backends.rocm.arch``: CDNA3 spells ``v_mfma_f32_32x32x8_f16`` where CDNA2 has
  ``v_mfma_f32_32x32x8f16``, and has int8 only as 16x16x32 / 32x32x16);
* no spills and no scratch (metadata note) and no ``scratch_*`` / private-segment access in
  the disassembly;
* the LDS the code object declares fits the arch's per-workgroup LDS (64 KiB on both);
* the disassembly header names the compiler that built it.

CI builds a few representative kernels per arch (``CI_CASES``); ``TILE_TEST_ISA_MATRIX=1``
builds every example kernel for both archs.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import pytest
from _rocm_kernels import CASES, assert_lds_reads_wait_for_dma, kernel, need_compiler

import tile.lang as tilelang
from tile.backends.rocm import capabilities
from tile.backends.rocm._src.gemm import MFMA_WRAPPERS
from tile.backends.rocm.toolchain import select_hip_compiler
from tile.ops.gemm import matmul_kernel
from tile.testsupport.markers import needs_hip_compiler

ARCHS = ("gfx942", "gfx90a")
FULL = os.environ.get("TILE_TEST_ISA_MATRIX", "") == "1"

CI_CASES = {
    "gfx942": ("gemm", "gemm_bf16", "int8_gemm", "int8_gemm_32", "flash_attention", "softmax", "lds_ring"),
    # test_rocm_compile.py already builds every example for gfx90a
    "gfx90a": ("lds_ring",),
}


def _lds_ring() -> Any:
    """A 3-stage fp16 gemm whose copies go over LDS DMA into a ring (``_src/lds_ring.py``)."""
    return matmul_kernel(128, 128, 256, block_M=64, block_N=64, block_K=32, threads=128, num_stages=3)


KERNELS = {**CASES, "lds_ring": _lds_ring}


def _cases() -> list[Any]:
    out = []
    for arch in ARCHS:
        for name in sorted(KERNELS):
            if FULL or name in CI_CASES[arch]:
                out.append(pytest.param(arch, name, id=f"{arch}-{name}"))
    return out


_need = need_compiler


@functools.cache
def _built(arch: str, name: str) -> Any:
    func = kernel(name) if name in CASES else KERNELS[name]()
    return tilelang.compile(func, target={"kind": "hip", "mcpu": arch})


def expected_mfma(arch: str, source: str) -> set[str]:
    """The mnemonics the HIP source's MFMA wrappers must become on ``arch``: wrapper ->
    (m, n, k, dtype) from the lowering's table -> the arch's instruction of that shape."""
    family = capabilities(arch).family
    shapes = {wrapper: key for key, wrapper in MFMA_WRAPPERS.items() if key[0] == family}
    want = set()
    for wrapper in set(re.findall(r"\btile_mfma_\w+", source)):
        assert wrapper in shapes, f"{wrapper} has no {family} instruction"
        _, m, n, k, dtype, acc = shapes[wrapper]
        (instr,) = [
            i
            for i in capabilities(arch).mfma
            if (i.m, i.n, i.k, i.input_dtype, i.accumulator_dtype) == (m, n, k, dtype, acc)
        ]
        want.add(instr.mnemonic)
    return want


@pytest.mark.parametrize(("arch", "name"), _cases())
def test_code_object_has_the_chosen_mfma_no_scratch_and_fits_lds(
    monkeypatch: pytest.MonkeyPatch, arch: str, name: str
) -> None:
    _need(arch)
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    built = _built(arch, name)
    binary = built.artifact.payload
    assert binary.code_object[:4] == b"\x7fELF"
    asm = built.get_kernel_source("asm")
    want = expected_mfma(arch, built.get_kernel_source("hip"))
    assert set(re.findall(r"\bv_mfma_\w+", asm)) == want
    if name in ("gemm", "gemm_bf16", "int8_gemm", "int8_gemm_32", "flash_attention", "lds_ring"):
        assert want, "a T.gemm kernel lowers to MFMAs"
    stats = binary.stats
    assert stats.spills == 0 and stats.scratch_bytes == 0, stats
    assert not re.search(r"\bscratch_(load|store)", asm)
    assert 0 <= stats.lds_bytes <= capabilities(arch).lds_bytes_per_block
    compiler = select_hip_compiler(arch)
    assert asm.splitlines()[0] == f"; {binary.recipe.kernel_name} for {arch}, built by {compiler.describe()}"


# The forms the lowering must choose on gfx942, from the CDNA3 instruction list (AMC; the
# arch table): 32x32 tiles where the waves' sub-tiles split into them, else 16x16.
GFX942_FORMS = {
    "gemm": ("v_mfma_f32_32x32x8_f16", 16),  # 4 waves, 64x64 each = 2x2 tiles, 4 K=8 steps per K tile
    "gemm_bf16": ("v_mfma_f32_32x32x8_bf16", None),
    "int8_gemm": ("v_mfma_i32_16x16x32_i8", None),  # K=32: one step per 32-wide K tile
    "int8_gemm_32": ("v_mfma_i32_32x32x16_i8", None),
    "flash_attention": ("v_mfma_f32_16x16x16_f16", None),  # 16 rows per wave
}


@needs_hip_compiler("gfx942")
@pytest.mark.parametrize("name", sorted(GFX942_FORMS))
def test_gfx942_mfma_forms(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    if name not in CI_CASES["gfx942"] and not FULL:
        pytest.skip("TILE_TEST_ISA_MATRIX=1 builds it")
    _need("gfx942")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    mnemonic, count = GFX942_FORMS[name]
    assert mnemonic in {i.mnemonic for i in capabilities("gfx942").mfma}
    asm = _built("gfx942", name).get_kernel_source("asm")
    found = re.findall(r"\bv_mfma_\w+", asm)
    assert set(found) == {mnemonic}
    if count is not None:
        assert len(found) == count


@needs_hip_compiler("gfx942")
def test_gfx942_lds_ring_waits_for_its_dma_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ring's LDS DMA loads (``buffer_load_dword ... lds``) and their vmcnt waits are in the
    gfx942 code object, and no LDS read follows a DMA load without a wait between."""
    _need("gfx942")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    asm = assert_lds_reads_wait_for_dma(_built("gfx942", "lds_ring").get_kernel_source("asm"))
    assert any(re.search(r"\bbuffer_load_dword\b.*\blds\b", line) for line in asm)


def _sin_kernel() -> Any:
    import tile.lang.language as T

    @T.prim_func
    def sines(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(64):
                Y[i] = T.sin(X[i])

    return sines


def test_device_library_functions_need_a_compiler_with_device_libraries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HIP's sinf is __ocml_native_sin_f32 (with -ffast-math): clang++-19 (no device libraries)
    cannot link it. For gfx90a the build moves on to Debian's hipcc (which has them); for
    gfx942 nothing here has them: a typed error naming the function, and under
    TILE_DEVICE=emu a source-only build that runs."""
    import numpy as np

    from tile.backends.rocm import DeviceLibrariesMissingError
    from tile.backends.rocm.toolchain import probe_hip_compiler

    plain = select_hip_compiler_or_skip("gfx942")
    if plain.device_libs:
        pytest.skip(f"{plain.describe()} links the device libraries: nothing to fall back from")
    monkeypatch.setenv("TILE_CACHE", "0")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    with_libs = probe_hip_compiler("gfx942", device_libs=True)
    if with_libs is None:
        with pytest.raises(DeviceLibrariesMissingError, match=r"__ocml_\w*sin_f32"):
            tilelang.compile(_sin_kernel(), target={"kind": "hip", "mcpu": "gfx942"})
        monkeypatch.setenv("TILE_DEVICE", "emu")
        built = tilelang.compile(_sin_kernel(), out_idx=[-1], target={"kind": "hip", "mcpu": "gfx942"})
        assert built.artifact.payload.code_object == b""
        x = np.linspace(-3, 3, 64, dtype=np.float32)
        np.testing.assert_allclose(built(x), np.sin(x), rtol=1e-5, atol=1e-6)
        monkeypatch.delenv("TILE_DEVICE")
    hipcc = probe_hip_compiler("gfx90a", device_libs=True)
    if hipcc is not None:
        built = tilelang.compile(_sin_kernel(), target={"kind": "hip", "mcpu": "gfx90a"})
        assert built.get_kernel_source("asm").splitlines()[0].endswith(hipcc.describe())


def select_hip_compiler_or_skip(arch: str) -> Any:
    _need(arch)
    return select_hip_compiler(arch)
