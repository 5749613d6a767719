"""tile.backends.rocm: AMD ROCm backend (CDNA2 gfx90a, CDNA3 gfx942; wave64).

``MANIFEST`` is what the ``tile.backends`` entry point names; targets are spelled as in
TileLang, ``{"kind": "hip", "mcpu": "gfx90a"}`` (``"arch"`` is accepted too). Importing
this module is cheap: TVM and hipcc are used on first call only.
"""

from __future__ import annotations

from tile.ir.backend import lazy_manifest

from .arch import CAPABILITIES as CAPABILITIES
from .arch import SUPPORTED_ARCHS as SUPPORTED_ARCHS
from .arch import MfmaInstr as MfmaInstr
from .arch import RocmArch as RocmArch
from .arch import RocmCapabilities as RocmCapabilities
from .arch import capabilities as capabilities
from .arch import parse_arch as parse_arch
from .errors import ArchSpecError as ArchSpecError
from .errors import DeviceLibrariesMissingError as DeviceLibrariesMissingError
from .errors import RocmArchError as RocmArchError
from .errors import RocmDeviceUnavailableError as RocmDeviceUnavailableError
from .errors import RocmLaunchError as RocmLaunchError
from .errors import ToolchainError as ToolchainError
from .errors import ToolchainNotFoundError as ToolchainNotFoundError
from .errors import UnsupportedArchError as UnsupportedArchError
from .toolchain import AmdClang as AmdClang
from .toolchain import Hipcc as Hipcc
from .toolchain import ToolVersion as ToolVersion
from .toolchain import find_amdclang as find_amdclang
from .toolchain import find_hipcc as find_hipcc
from .toolchain import probe_amdclang as probe_amdclang
from .toolchain import probe_hipcc as probe_hipcc


def device_present() -> bool:
    """Whether a HIP runtime with a ROCm device is here (never raises; imports no SDK)."""
    from ._src.runtime import hip_probe

    return hip_probe()


MANIFEST = lazy_manifest(
    "rocm",
    ("hip",),
    f"{__name__}._src.backend",
    device_present=device_present,
    # Below the CPU: "auto" must not send numpy-array callers to a GPU.
    auto_priority=-10,
    dlpack_device=10,  # kDLROCM
)
"""The ROCm backend's manifest (the value of the ``tile.backends`` entry point ``rocm``)."""
