"""HIP kernels under the CPU emulator (``TILE_DEVICE=emu``), as wave64.

The kernel's generated HIP source, unchanged, is compiled by the host C++ compiler
against the CPU ``tile_hip.h`` that this package ships and registers with the emulator
(``tile.backends.rocm.emu``, the device ``"hip"`` of ``tile.backends.cpu.simt``) and
launched with warp size 64: shuffles span 64 lanes and every ``tile_mfma_*`` call is
a wave collective computed by ``emu/native/simt_mfma.cpp``. Argument
checks and the launch are the GPU layer's (``tile.ir.gpu.EmulatedKernel``: the launch
recipe, host arrays).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from tile.ir.errors import BackendUnavailableError
from tile.ir.gpu import EmulatedKernel

from .. import env
from ..errors import RocmLaunchError

WAVE_SIZE = 64


def emulating() -> bool:
    """Whether HIP-target kernels run under the CPU emulator (``TILE_DEVICE=emu``)."""
    return env.TILE_DEVICE.get() == "emu"


EMULATOR = "tile.backends.cpu.simt"
"""The CPU emulator's module (tile-backends-cpu, this package's ``[emu]`` extra)."""


def can_emulate() -> bool:
    """Whether ``TILE_DEVICE=emu`` can work here: the emulator (tile-backends-cpu) is installed."""
    try:
        return importlib.util.find_spec(EMULATOR) is not None
    except ImportError:  # tile.backends.cpu itself is missing
        return False


def _simt() -> Any:
    if not can_emulate():
        raise BackendUnavailableError(
            "TILE_DEVICE=emu runs HIP kernels on the CPU emulator, which tile-backends-cpu provides",
            hint="pip install 'tile-backends-rocm[emu]', or unset TILE_DEVICE to launch on a GPU",
        )
    return importlib.import_module(EMULATOR)


class EmulatedHipKernel(EmulatedKernel):
    """A HIP kernel's source compiled for the emulator as wave64, seeded; call it with host arrays
    (example: :class:`tile.ir.gpu.EmulatedKernel`)."""

    launch_error = RocmLaunchError
    where = ", emulated wave64"

    warp_size = WAVE_SIZE
    seed = 0

    def emulator(self) -> tuple[Any, Any]:
        simt = _simt()
        from .. import emu  # the emulated device "hip": this package's emulation headers

        return simt, emu.DEVICE
