"""Under TILE_DEVICE=emu the ROCm backend builds without a HIP compiler: HIP source only, no code object."""

from __future__ import annotations

import numpy as np
import pytest
from _rocm_kernels import hide_hip_compilers

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.rocm._src import backend
from tile.ir.errors import BackendError
from tile.lang._src.cache import KernelCacheWarning
from tile.testsupport.markers import needs_hipcc, needs_host_cxx

TARGET = {"kind": "hip", "mcpu": "gfx90a"}
pytestmark = needs_host_cxx


@pytest.fixture
def no_hipcc(monkeypatch: pytest.MonkeyPatch, tmp_path):
    hide_hip_compilers(monkeypatch, tmp_path)
    monkeypatch.setenv("TILE_CACHE", "0")
    backend._compiler_present.cache_clear()
    yield
    backend._compiler_present.cache_clear()


def scale_kernel(n: int = 200):
    @T.prim_func
    def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = A[bx * 64 + i] * 3.0

    return scale


def test_emulated_build_needs_no_hipcc(monkeypatch, no_hipcc):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(scale_kernel(), out_idx=[-1], target=TARGET)
    assert kernel.artifact.payload.code_object == b""
    assert "__global__" in kernel.get_kernel_source("hip")
    a = np.arange(200, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a * 3)
    with pytest.raises(BackendError, match="without a HIP compiler"):
        kernel.get_kernel_source("asm")


def test_a_source_only_build_cannot_launch_on_a_gpu(monkeypatch, no_hipcc):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    artifact = tilelang.compile(scale_kernel(), out_idx=[-1], target=TARGET).artifact
    monkeypatch.delenv("TILE_DEVICE")
    with pytest.raises(BackendError, match="without a HIP compiler"):
        backend.load(artifact)


@needs_hipcc
def test_emulation_can_leave_out_the_hipcc_check(monkeypatch, tmp_path):
    # TILE_EMU_VENDOR_COMPILE=0: hipcc is installed but not run (under the emulator the code
    # object is only a check); a later build that wants the check rebuilds the cached entry
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    kernel = tilelang.compile(scale_kernel(), out_idx=[-1], target=TARGET)
    assert kernel.artifact.payload.code_object == b""
    a = np.arange(200, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a * 3)
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "1")
    with pytest.warns(KernelCacheWarning, match="TILE_EMU_VENDOR_COMPILE=0"):
        checked = tilelang.compile(scale_kernel(), out_idx=[-1], target=TARGET)
    assert checked.artifact.payload.code_object[:4] == b"\x7fELF"
