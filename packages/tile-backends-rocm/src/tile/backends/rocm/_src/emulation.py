"""HIP kernels under the CPU emulator (``TILE_DEVICE=emu``), as wave64.

The kernel's generated HIP source, unchanged, is compiled by the host C++ compiler
against the emulator's CPU ``tile_hip.h`` (``tile.backends.cpu.simt``'s include folder)
and launched with warp size 64: shuffles span 64 lanes and every ``tile_mfma_*`` call is
a ``TILE_SIMT_MFMA`` wave collective computed by ``runtime/simt_mfma.cpp``. Argument
checks and the launch are the CUDA emulation's (same recipe, host arrays).
"""

from __future__ import annotations

from collections.abc import Sequence

from tile.backends.cuda._src.codegen import LaunchRecipe
from tile.backends.cuda._src.emulation import EmulatedCudaKernel, _simt
from tile.ir.errors import SourceLocation

from .. import env
from ..errors import RocmLaunchError

WAVE_SIZE = 64
DEVICE_HEADER = "tile_hip.h"


def emulating() -> bool:
    """Whether HIP-target kernels run under the CPU emulator (``TILE_DEVICE=emu``)."""
    return env.TILE_DEVICE.get() == "emu"


class EmulatedHipKernel(EmulatedCudaKernel):
    """A HIP kernel's source compiled for the emulator (wave64); call it with host arrays.

    Example::

        # TILE_DEVICE=emu
        kernel = tilelang.compile(func, out_idx=[2], target={"kind": "hip", "mcpu": "gfx90a"})
        c = kernel(a, b)  # numpy in, numpy out, computed by the generated HIP code
    """

    def __init__(
        self,
        source: str,
        recipe: LaunchRecipe,
        params: Sequence[tuple[str, str, tuple[int | str, ...] | None]],
        location: SourceLocation | None = None,
    ) -> None:
        simt = _simt()
        self.source = source
        self.recipe = recipe
        self.params = list(params)
        self.location = location
        self.library = simt.kernel_library(source, recipe.kernel_name, DEVICE_HEADER)
        self.simt_kernel = simt.SimtKernel(self.library, warp_size=WAVE_SIZE)
        self.seed = 0

    def _fail(self, message: str, hint: str) -> RocmLaunchError:  # type: ignore[override]
        return RocmLaunchError(
            f"{message} (kernel {self.recipe.kernel_name}, emulated wave64)",
            hint=hint,
            location=self.location,
        )
