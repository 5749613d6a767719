"""tile.backends.cpu: run tile kernels on the host CPU (LLVM through apache-tvm).

``MANIFEST`` is what the ``tile.backends`` entry point names. Importing this module
is cheap: the pass pipeline, TVM and LLVM are imported on first use.
"""

from __future__ import annotations

from tile.ir.backend import lazy_manifest
from tile.ir.target import Target

DLPACK_HOST_DEVICES = (1, 3, 11)
"""DLPack device types the CPU reads directly: host memory, CUDA- and ROCm-pinned host memory."""


def _device_target(device_type: int, index: int) -> Target | None:
    if device_type not in DLPACK_HOST_DEVICES:
        return None
    from ._src import backend

    return backend.default_target()


MANIFEST = lazy_manifest(
    "cpu", ("cpu",), f"{__name__}._src.backend", device_present=lambda: True, device_target=_device_target
)
"""The CPU backend's manifest (the value of the ``tile.backends`` entry point ``cpu``)."""
