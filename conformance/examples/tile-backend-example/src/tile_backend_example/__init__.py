"""An example third-party tile backend (see README.md).

``MANIFEST`` is the value of the ``example`` entry point in the ``tile.backends``
group. Importing this module is cheap: it imports only ``tile.ir.backend`` and
``tile.ir.target``; the CPU backend (TVM, LLVM) is imported by the manifest's
callables when first used.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.backend import BackendManifest, BuildArtifact, Capabilities
from tile.ir.target import Target

KIND = "examplecpu"

# Narrower than the CPU backend on purpose: no bfloat16, no fp8.
DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64"]
)
SHARED_BYTES = 48 * 1024

_rules_registered = False


def _cpu() -> Any:
    """The CPU backend's implementation module, with its lowering rules also serving KIND."""
    global _rules_registered
    from tile.backends.cpu._src import backend

    if not _rules_registered:
        from tile.ir.ops import Gemm, lower_gemm_loops, register_lowering

        register_lowering(Gemm, target=KIND)(lower_gemm_loops)
        _rules_registered = True
    return backend


def _capabilities(target: Target) -> Capabilities:
    from tile.backends.cpu._src.host import vector_bits

    return Capabilities(
        warp_size=1,
        max_threads=1024,
        shared_bytes=SHARED_BYTES,
        dtypes=DTYPES,
        vector_bits=vector_bits(),
        has_device=True,
        thread_binding=False,
        async_copy=False,
    )


def _pipeline(target: Target) -> Sequence[Any]:
    return _cpu().pipeline(target)  # type: ignore[no-any-return]


def _build(mod: Any, target: Target) -> BuildArtifact:
    return _cpu().build(mod, target)  # type: ignore[no-any-return]


def _load(artifact: BuildArtifact) -> Callable[..., Any]:
    return _cpu().load(artifact)  # type: ignore[no-any-return]


def _save(artifact: BuildArtifact, directory: pathlib.Path) -> None:
    _cpu().save(artifact, directory)


def _restore(directory: pathlib.Path, target: Target) -> Any:
    return _cpu().restore(directory, target)


def _default_target() -> Target:
    from tile.backends.cpu._src.host import host_cpu

    return Target(kind=KIND, arch=host_cpu())


MANIFEST = BackendManifest(
    name="example",
    target_kinds=(KIND,),
    capabilities=_capabilities,
    pipeline=_pipeline,
    build=_build,
    load=_load,
    device_present=lambda: True,
    default_target=_default_target,
    auto_priority=-1,  # never preferred by "auto" over a real backend
    save=_save,
    restore=_restore,
)
"""The example backend's manifest (entry point ``example`` in ``tile.backends``)."""
