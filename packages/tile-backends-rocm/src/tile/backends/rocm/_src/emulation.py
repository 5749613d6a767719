"""HIP kernels under the CPU emulator (``TILE_DEVICE=emu``), as wave64.

The kernel's generated HIP source, unchanged, is compiled by the host C++ compiler
against the CPU ``tile_hip.h`` that this package ships and registers with the emulator
(``tile.backends.rocm.emu``, the device ``"hip"`` of ``tile.backends.cpu.simt``) and
launched with warp size 64: shuffles span 64 lanes and every ``tile_mfma_*`` call is
a wave collective computed by ``emu/native/simt_mfma.cpp``. Argument
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
        from .. import emu  # the emulated device "hip": this package's emulation headers

        self.source = source
        self.recipe = recipe
        self.params = list(params)
        self.location = location
        self.library = simt.kernel_library(source, recipe.kernel_name, emu.DEVICE)
        self.simt_kernel = simt.SimtKernel(self.library, warp_size=WAVE_SIZE, device=emu.DEVICE)
        self.seed = 0

    def _fail(self, message: str, hint: str) -> RocmLaunchError:  # type: ignore[override]
        return RocmLaunchError(
            f"{message} (kernel {self.recipe.kernel_name}, emulated wave64)",
            hint=hint,
            location=self.location,
        )
