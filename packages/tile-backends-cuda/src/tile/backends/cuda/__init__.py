"""tile.backends.cuda: NVIDIA CUDA backend (sm_75, sm_80, sm_86, sm_89, sm_90a).

``MANIFEST`` is what the ``tile.backends`` entry point names. Importing this module
is cheap: TVM, nvcc and the CUDA driver bindings are used on first call only.
"""

from __future__ import annotations

import dataclasses

from tile.ir.backend import lazy_manifest
from tile.ir.target import Target

from .arch import CAPABILITIES as CAPABILITIES
from .arch import SUPPORTED_ARCHS as SUPPORTED_ARCHS
from .arch import CudaArch as CudaArch
from .arch import CudaCapabilities as CudaCapabilities
from .arch import MmaInstr as MmaInstr
from .arch import capabilities as capabilities
from .arch import parse_arch as parse_arch
from .errors import ArchSpecError as ArchSpecError
from .errors import CudaArchError as CudaArchError
from .errors import CudaDeviceUnavailableError as CudaDeviceUnavailableError
from .errors import CudaLaunchError as CudaLaunchError
from .errors import ToolchainError as ToolchainError
from .errors import ToolchainNotFoundError as ToolchainNotFoundError
from .errors import UnsupportedArchError as UnsupportedArchError
from .toolchain import NvccToolchain as NvccToolchain
from .toolchain import NvccVersion as NvccVersion
from .toolchain import find_nvcc as find_nvcc
from .toolchain import probe_nvcc as probe_nvcc


def device_present() -> bool:
    """Whether a CUDA driver with a device is here (never raises; imports no SDK)."""
    from ._src.runtime import driver_probe

    return driver_probe()


def _complete_target(target: Target) -> Target:
    """A target that names no arch is built for the GPU here (sm_80 where there is none)."""
    if target.arch is not None:
        return target
    from ._src.backend import arch_of

    return dataclasses.replace(target, arch=arch_of(target))


MANIFEST = lazy_manifest(
    "cuda",
    ("cuda",),
    f"{__name__}._src.backend",
    device_present=device_present,
    # Below the CPU for now: "auto" must not send numpy-array callers to a GPU.
    auto_priority=-10,
    complete_target=_complete_target,
    dlpack_device=2,  # kDLCUDA
)
"""The CUDA backend's manifest (the value of the ``tile.backends`` entry point ``cuda``)."""
