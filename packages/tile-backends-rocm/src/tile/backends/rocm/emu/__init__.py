"""The ROCm backend's device under the GPU emulator (``TILE_DEVICE=emu``), as wave64.

``include/`` holds the emulation variant of the device header: ``tile_hip.h`` and
``tile_hip/*.h`` with the entry points of the GPU header (``tile/backends/rocm/include``)
implemented on the host through the emulator's runtime (what reads the same in both, such
as ``tile_hip/vectors.h``, is included from the GPU header's folder, searched after this one);
``native/simt_mfma.cpp`` computes
the MFMA wave collectives (the device library, built once and loaded before HIP kernels).
Importing this module registers it with the emulator (``tile.backends.cpu.simt``, which
tile-backends-cpu provides: the ``emu`` extra) as the device ``"hip"``, warp size 64.
``EmulatedHipKernel`` (``_src/emulation.py``) compiles and launches against ``DEVICE``.
"""

from __future__ import annotations

from pathlib import Path

from tile.backends.cpu.simt import EmulatedDevice, register_device

_HERE = Path(__file__).resolve().parent

DEVICE = register_device(
    EmulatedDevice(
        name="hip",
        header="tile_hip.h",
        # the GPU header's folder after this one: what both variants share (tile_hip/vectors.h)
        include_dirs=(_HERE / "include", _HERE.parent / "include"),
        warp_size=64,
        native_sources=(_HERE / "native" / "simt_mfma.cpp",),
    )
)
