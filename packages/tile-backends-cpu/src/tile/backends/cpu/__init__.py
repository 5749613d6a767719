"""tile.backends.cpu: run tile kernels on the host CPU (LLVM through apache-tvm).

``MANIFEST`` is what the ``tile.backends`` entry point names. Importing this module
is cheap: the pass pipeline, TVM and LLVM are imported on first use.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.backend import BackendManifest, BuildArtifact, Capabilities
from tile.ir.target import Target


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


DLPACK_HOST_DEVICES = (1, 3, 11)
"""DLPack device types the CPU reads directly: host memory, CUDA- and ROCm-pinned host memory."""


def _device_target(device_type: int, index: int) -> Target | None:
    return _default_target() if device_type in DLPACK_HOST_DEVICES else None


MANIFEST = BackendManifest(
    name="cpu",
    target_kinds=("cpu",),
    capabilities=_capabilities,
    pipeline=_pipeline,
    build=_build,
    load=_load,
    device_present=lambda: True,
    default_target=_default_target,
    auto_priority=0,
    save=_save,
    restore=_restore,
    device_target=_device_target,
)
"""The CPU backend's manifest (the value of the ``tile.backends`` entry point ``cpu``)."""
