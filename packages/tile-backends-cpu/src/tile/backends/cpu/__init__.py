"""tile.backends.cpu: run tile kernels on the host CPU (LLVM through apache-tvm).

``MANIFEST`` is what the ``tile.backends`` entry point names. Importing this module
is cheap: the pass pipeline, TVM and LLVM are imported on first use.
"""

from __future__ import annotations

from tile.ir.backend import lazy_manifest

MANIFEST = lazy_manifest("cpu", ("cpu",), f"{__name__}._src.backend", device_present=lambda: True)
"""The CPU backend's manifest (the value of the ``tile.backends`` entry point ``cpu``)."""
