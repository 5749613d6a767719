"""The CUDA backend's device under the GPU emulator (``TILE_DEVICE=emu``).

``include/`` holds the emulation variant of the device header: ``tile_cuda.h`` and
``tile_cuda/*.h`` with the entry points of the GPU header (``tile/backends/cuda/include``)
implemented on the host through the emulator's runtime, and the ``cuda.h``,
``cuda_fp16.h``, ... names a CUDA source may include; ``native/simt_mma.cpp`` computes the
``mma.sync`` warp collectives (the device library, built once and loaded before CUDA
kernels). Importing this module registers it
with the emulator (``tile.backends.cpu.simt``, which tile-backends-cpu provides: the
``emu`` extra) as the device ``"cuda"``, warp size 32.

Example::

    from tile.backends.cpu.simt import SimtKernel, kernel_library
    from tile.backends.cuda.emu import DEVICE
    kernel = SimtKernel(kernel_library(source, "main_kernel", DEVICE), device=DEVICE)
"""

from __future__ import annotations

from pathlib import Path

from tile.backends.cpu.simt import EmulatedDevice, register_device

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
NATIVE_DIR = Path(__file__).resolve().parent / "native"

DEVICE = register_device(
    EmulatedDevice(
        name="cuda",
        header="tile_cuda.h",
        include_dirs=(INCLUDE_DIR,),
        warp_size=32,
        native_sources=(NATIVE_DIR / "simt_mma.cpp",),
    )
)
