"""A third GPU vendor plugs into the emulator with no edit to tile-backends-cpu.

"toy" (``emu_vendor_toy/``, only in these tests) has its own device header, 16-lane warps,
a preamble macro and one native collective, ``toy::warp_sum``, computed by its own C++
source. It registers through the public API (``EmulatedDevice``, ``register_device``) and
its kernel runs on the emulator and matches numpy. The emulator itself holds no vendor's
header.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _cpu_simt_support import needs_cxx

from tile.backends.cpu import simt
from tile.backends.cpu.simt import EmulatedDevice, SimtDeviceError, SimtKernel, SimtMisuseError

TOY = Path(__file__).resolve().parent / "emu_vendor_toy"
SIMT_SOURCES = Path(simt.__file__).resolve().parent


def _toy(root: Path = TOY, name: str = "toy", lanes: int = 16) -> EmulatedDevice:
    return EmulatedDevice(
        name=name,
        header="tile_toy.h",
        include_dirs=(root / "include",),
        warp_size=lanes,
        native_sources=(root / "native" / "toy_collectives.cpp",),
        preamble=f"#define TOY_LANES {lanes}",
    )


# What the toy backend's code generator would emit: each 16-lane warp sums one row of x,
# then thread 0 adds the block's rows from shared memory.
ROW_SUM = r"""#include "tile_toy.h"

__global__ void row_sums(const float* x, float* rows, float* blocks, int n, int tag_bug) {
  __shared__ float partial[8];
  const int row = blockIdx.x * (blockDim.x / TOY_LANES) + toy::warp();
  float mine = 0.0f;
  for (int j = toy::lane(); j < n; j += TOY_LANES) mine += x[row * n + j];
  const float total = toy::warp_sum(mine, tag_bug && toy::lane() == 5 ? 1 : 0);
  if (toy::lane() == 0) {
    rows[row] = total;
    partial[toy::warp()] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < (int)(blockDim.x / TOY_LANES); ++w) sum += partial[w];
    blocks[blockIdx.x] = sum;
  }
}
"""


def _run(device: EmulatedDevice, x: np.ndarray, warps: int, tag_bug: int = 0) -> tuple[np.ndarray, ...]:
    rows = np.full(x.shape[0], np.nan, np.float32)
    blocks = np.full(x.shape[0] // warps, np.nan, np.float32)
    kernel = SimtKernel(simt.kernel_library(ROW_SUM, "row_sums", device), device=device)
    args = [ctypes.c_void_p(a.ctypes.data) for a in (x, rows, blocks)]
    args += [ctypes.c_int32(x.shape[1]), ctypes.c_int32(tag_bug)]
    kernel.launch((blocks.size, 1, 1), (16 * warps, 1, 1), 0, args)
    return rows, blocks


def test_the_emulator_owns_no_vendor_header() -> None:
    vendor = [p.name for p in SIMT_SOURCES.rglob("*") if p.name.startswith(("tile_cuda", "tile_hip", "cuda"))]
    assert vendor == []
    assert {p.name for p in (SIMT_SOURCES / "include").iterdir()} == {
        "tile_simt.h",
        "tile_simt_dialect.h",
        "tile_simt_common.h",
    }


@needs_cxx
def test_toy_vendor_kernel_matches_numpy() -> None:
    device = simt.register_device(_toy())
    assert simt.resolve_device("toy") is device and simt.registered_devices().count(device) == 1
    rng = np.random.default_rng(7)
    x = rng.integers(-8, 8, size=(24, 40)).astype(np.float32)  # small integers: sums are exact
    rows, blocks = _run(device, x, warps=4)
    np.testing.assert_array_equal(rows, x.sum(axis=1))
    np.testing.assert_array_equal(blocks, x.reshape(6, 4 * 40).sum(axis=1))


@needs_cxx
def test_toy_collective_faults_reach_the_user() -> None:
    x = np.ones((4, 16), np.float32)
    with pytest.raises(SimtMisuseError, match=r"toy::warp_sum: lane 5 passed tag 1.*line 8"):
        _run(simt.register_device(_toy()), x, warps=4, tag_bug=1)


@needs_cxx
def test_toy_kernel_cache_key_covers_vendor_files(tmp_path: Path) -> None:
    root = tmp_path / "toy"
    shutil.copytree(TOY, root)
    device = _toy(root, name="toy_copy")
    first = simt.kernel_library(ROW_SUM, "row_sums", device)
    assert simt.kernel_library(ROW_SUM, "row_sums", device) == first
    header = root / "include" / "tile_toy.h"
    header.write_text(header.read_text() + "\n// another revision\n")
    second = simt.kernel_library(ROW_SUM, "row_sums", device)
    native = root / "native" / "toy_collectives.cpp"
    native.write_text(native.read_text() + "\n// another revision\n")
    third = simt.kernel_library(ROW_SUM, "row_sums", device)
    assert len({first, second, third}) == 3
    library = simt.device_library(device)
    assert library is not None and library.name.startswith("libtile_simt_toy_copy-")


def test_device_registration_errors() -> None:
    simt.register_device(_toy())
    simt.register_device(_toy())  # the same device again: harmless
    with pytest.raises(SimtDeviceError, match="already registered as 'toy'"):
        simt.register_device(_toy(lanes=32))
    with pytest.raises(SimtDeviceError, match="no emulated device is registered as 'nosuch'"):
        simt.kernel_library(ROW_SUM, "row_sums", "nosuch")
    with pytest.raises(SimtDeviceError, match=r"its header tile_toy\.h is in none of its include folders"):
        EmulatedDevice(name="broken", header="tile_toy.h", include_dirs=(TOY / "native",))
    with pytest.raises(SimtDeviceError, match="warp size 48"):
        _toy(lanes=48)


@needs_cxx
def test_a_kernel_loaded_without_its_device_names_the_fix() -> None:
    # A fresh process: here the toy device's library may already be loaded by another test.
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from tile.backends.cpu import simt
        toy = Path({str(TOY)!r})
        device = simt.EmulatedDevice(
            name="toy", header="tile_toy.h", include_dirs=(toy / "include",), warp_size=16,
            native_sources=(toy / "native" / "toy_collectives.cpp",), preamble="#define TOY_LANES 16")
        library = simt.kernel_library({ROW_SUM!r}, "row_sums", device)
        try:
            simt.SimtKernel(library)
        except simt.SimtLaunchError as exc:
            print("refused:", exc)
        simt.SimtKernel(library, device=device)
        print("loaded with its device")
        """
    )
    command = [sys.executable, "-c", script]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "refused: cannot load the emulated kernel" in result.stdout
    assert "toy_warp_sum_compute" in result.stdout and "device=" in result.stdout
    assert result.stdout.rstrip().endswith("loaded with its device")
