"""tile.backends.rocm: AMD ROCm backend (CDNA2 gfx90a, CDNA3 gfx942; wave64).

``MANIFEST`` is what the ``tile.backends`` entry point names; targets are spelled as in
TileLang, ``{"kind": "hip", "mcpu": "gfx90a"}`` (``"arch"`` is accepted too). Importing
this module is cheap: TVM and hipcc are used on first call only.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.backend import BackendManifest, BuildArtifact, Capabilities
from tile.ir.target import Target

from .arch import CAPABILITIES as CAPABILITIES
from .arch import SUPPORTED_ARCHS as SUPPORTED_ARCHS
from .arch import MfmaInstr as MfmaInstr
from .arch import RocmArch as RocmArch
from .arch import RocmCapabilities as RocmCapabilities
from .arch import capabilities as capabilities
from .arch import parse_arch as parse_arch
from .errors import ArchSpecError as ArchSpecError
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


def _capabilities(target: Target) -> Capabilities:
    from ._src import backend

    return backend.capabilities(target)


def _pipeline(target: Target) -> Sequence[Any]:
    from ._src import backend

    return backend.pipeline(target)


def _build(mod: Any, target: Target) -> BuildArtifact:
    from ._src import backend

    return backend.build(mod, target)


def _load(artifact: BuildArtifact) -> Callable[..., Any]:
    from ._src import backend

    return backend.load(artifact)


def _save(artifact: BuildArtifact, directory: pathlib.Path) -> None:
    from ._src import backend

    backend.save(artifact, directory)


def _restore(directory: pathlib.Path, target: Target) -> Any:
    from ._src import backend

    return backend.restore(directory, target)


def _default_target() -> Target:
    from ._src import backend

    return backend.default_target()


def device_present() -> bool:
    """Whether a HIP runtime with a ROCm device is here (never raises; imports no SDK)."""
    from ._src.runtime import hip_probe

    return hip_probe()


def _device_target(device_type: int, index: int) -> Target | None:
    if device_type != 10:  # kDLROCM; checked here so other devices import nothing
        return None
    from ._src import backend

    return backend.device_target(device_type, index)


MANIFEST = BackendManifest(
    name="rocm",
    target_kinds=("hip",),
    capabilities=_capabilities,
    pipeline=_pipeline,
    build=_build,
    load=_load,
    device_present=device_present,
    default_target=_default_target,
    # Below the CPU: "auto" must not send numpy-array callers to a GPU.
    auto_priority=-10,
    save=_save,
    restore=_restore,
    device_target=_device_target,
)
"""The ROCm backend's manifest (the value of the ``tile.backends`` entry point ``rocm``)."""
