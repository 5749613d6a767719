"""The ROCm backend's device under the GPU emulator (``TILE_DEVICE=emu``), as wave64.

``include/`` holds the emulation variant of the device header: ``tile_hip.h`` and
``tile_hip/*.h`` with the entry points of the GPU header (``tile/backends/rocm/include``)
implemented on the host through the emulator's runtime; ``native/simt_mfma.cpp`` computes
the MFMA wave collectives (the device library, built once and loaded before HIP kernels).
Importing this module registers it with the emulator (``tile.backends.cpu.simt``, which
tile-backends-cpu provides: the ``emu`` extra) as the device ``"hip"``, warp size 64.

Example::

    from tile.backends.cpu.simt import SimtKernel, kernel_library
    from tile.backends.rocm.emu import DEVICE
    kernel = SimtKernel(kernel_library(source, "main_kernel", DEVICE), device=DEVICE)
"""

from __future__ import annotations

from pathlib import Path

from tile.backends.cpu.simt import EmulatedDevice, register_device

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
NATIVE_DIR = Path(__file__).resolve().parent / "native"

DEVICE = register_device(
    EmulatedDevice(
        name="hip",
        header="tile_hip.h",
        include_dirs=(INCLUDE_DIR,),
        warp_size=64,
        native_sources=(NATIVE_DIR / "simt_mfma.cpp",),
    )
)
