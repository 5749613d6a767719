"""The emulator's precompiled device header: built once per compiler, flags and header
contents, valid for the flags kernels are compiled with (gcc's ``-H`` marks a header it
loaded precompiled with ``!``), rebuilt when damaged, and off with ``TILE_EMU_PCH=0``."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from _cpu_simt_support import launch, needs_cxx

from tile.backends.cpu.simt import _toolchain as toolchain
from tile.backends.cuda.emu import DEVICE as CUDA

SCALE = r"""
extern "C" __global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 3.0f * x[i] - 1.0f;
}
"""


def _gcc_or_skip() -> str:
    cxx = toolchain.find_host_compiler()
    if not toolchain._is_gcc(cxx):
        pytest.skip(f"{cxx} is not GCC: kernels are compiled without a precompiled header")
    return cxx


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILE_EMU_PCH", raising=False)
    toolchain._SOUND_HEADERS.clear()
    yield tmp_path
    toolchain._SOUND_HEADERS.clear()


def _loaded_precompiled(cxx: str, flags: list[str], folder, tmp_path) -> str:
    """gcc's -H line for the device header, compiling a unit that starts with it as a kernel's does."""
    unit = tmp_path / "unit.cpp"
    unit.write_text(f'#include "{CUDA.header}"\nint main() {{ return 0; }}\n')
    folders = (folder, *CUDA.include_dirs, *toolchain.HEADER_DIRS)
    search = [arg for path in folders for arg in ("-I", str(path))]
    compile_only = [flag for flag in flags if flag != "-shared"]
    done = subprocess.run([cxx, *compile_only, *search, "-H", "-fsyntax-only", str(unit)],
                          capture_output=True, text=True, check=True)
    return done.stderr.splitlines()[0]


@needs_cxx
@pytest.mark.parametrize("checked", [False, True], ids=["plain", "checked"])
def test_the_precompiled_header_is_valid_for_the_kernel_flags(cache, tmp_path, checked) -> None:
    cxx = _gcc_or_skip()
    flags = [*toolchain.KERNEL_FLAGS, *(toolchain.CHECK_FLAGS if checked else ())]
    if toolchain.accepts_flag(cxx, toolchain.POISON_FLAG):
        flags.append(toolchain.POISON_FLAG)
    folder = toolchain.precompiled_header(cxx, flags, CUDA)
    assert folder is not None and folder.is_relative_to(cache)
    assert (folder / CUDA.header).read_bytes() == next(
        d / CUDA.header for d in CUDA.include_dirs if (d / CUDA.header).is_file()).read_bytes()
    # "!": gcc loaded the .gch; "x": it found one but could not use it (flags differ)
    assert _loaded_precompiled(cxx, flags, folder, tmp_path) == f"! {folder / CUDA.header}.gch"
    # the same flags find the same folder; other flags get their own
    assert toolchain.precompiled_header(cxx, flags, CUDA) == folder
    assert toolchain.precompiled_header(cxx, [*flags, "-DTILE_OTHER=1"], CUDA) != folder


@needs_cxx
def test_a_kernel_built_with_it_computes_and_a_damaged_one_is_rebuilt(cache) -> None:
    _gcc_or_skip()
    x = np.linspace(-2.0, 2.0, 100, dtype=np.float32)
    y = np.zeros_like(x)
    launch(SCALE, "scale", (2, 1, 1), (64, 1, 1), x, y, np.int32(x.size))
    np.testing.assert_array_equal(y, 3.0 * x - 1.0)
    (compiled,) = (cache / "simt" / "pch").glob(f"*/{CUDA.header}.gch")
    size = compiled.stat().st_size
    compiled.write_bytes(compiled.read_bytes()[: size // 2])  # truncated, as by a full disk
    toolchain._SOUND_HEADERS.clear()  # a new process: it checks the seal again
    cxx = toolchain.find_host_compiler()
    flags = [*toolchain.KERNEL_FLAGS, toolchain.POISON_FLAG]
    assert toolchain.precompiled_header(cxx, flags, CUDA) == compiled.parent
    assert toolchain.is_built(compiled) and compiled.stat().st_size > size // 2  # rebuilt whole


def test_tile_emu_pch_0_turns_it_off(cache, monkeypatch) -> None:
    monkeypatch.setenv("TILE_EMU_PCH", "0")
    assert toolchain.precompiled_header("c++", list(toolchain.KERNEL_FLAGS), CUDA) is None
    assert not (cache / "simt" / "pch").exists()
