"""The CPU backend's pipeline, build and load (imported lazily by the manifest)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.backend import BuildArtifact, Capabilities
from tile.ir.errors import BackendError
from tile.ir.target import Target
from tile.ir.transform import (
    BIND_PARALLEL_LOOPS,
    CHECK_RESOURCES,
    INFER_LAYOUT,
    LEGALIZE_FP8,
    LOWER_TILE_OPS,
    NORMALIZE,
    PLAN_PIPELINE,
    PLAN_STORAGE,
    SERIALIZE_BLOCK_GRID,
    SERIALIZE_PIPELINED_LOOPS,
    SPLIT_DYNAMIC_TAILS,
    Pass,
)

from .. import env
from . import lowering as _lowering  # noqa: F401  (registers the CPU rules)
from . import reduce_lowering as _reduce_lowering  # noqa: F401  (registers the CPU reduce rule)
from .fast_math import INLINE_FAST_EXP
from .host import host_cpu, vector_bits
from .param_alignment import DECLARE_PARAM_ALIGNMENT

DTYPES = frozenset(
    [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "float8_e4m3fn",
        "float8_e5m2",
    ]
)


def capabilities(target: Target) -> Capabilities:
    return Capabilities(
        warp_size=1,
        max_threads=1024,
        shared_bytes=1 << 24,
        dtypes=DTYPES,
        vector_bits=vector_bits(),
        has_device=True,
        thread_binding=False,
        async_copy=False,
        param_alignment=1,  # element-aligned: see param_alignment.py
    )


def pipeline(target: Target) -> Sequence[Pass]:
    return [
        CHECK_RESOURCES,
        NORMALIZE,
        INFER_LAYOUT,
        PLAN_PIPELINE,
        PLAN_STORAGE,
        LOWER_TILE_OPS,
        LEGALIZE_FP8,
        SPLIT_DYNAMIC_TAILS,
        SERIALIZE_PIPELINED_LOOPS,
        BIND_PARALLEL_LOOPS,
        SERIALIZE_BLOCK_GRID,
        DECLARE_PARAM_ALIGNMENT,
        INLINE_FAST_EXP,
    ]


def llvm_target(target: Target) -> dict[str, str]:
    return {"kind": "llvm", "mcpu": target.arch or host_cpu()}


def build(mod: Any, target: Target) -> BuildArtifact:
    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    if len(names) != 1:
        raise BackendError(f"the CPU backend builds one kernel per module, got {names}")
    try:
        executable = tvm.compile(mod, target=llvm_target(target))
    except Exception as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise BackendError(
            f"LLVM code generation failed for kernel {names[0]}: "
            f"{lines[-1] if lines else type(exc).__name__}",
            hint="set TILE_DUMP_IR=<dir> to inspect the IR handed to LLVM",
        ) from exc
    sources = {"tir": mod.script(), "llvm": executable.mod.inspect_source("ll")}
    return BuildArtifact(target=target, entry_name=names[0], payload=executable, sources=sources)


_threads_configured = False


def _configure_threads() -> None:
    global _threads_configured
    if _threads_configured:
        return
    _threads_configured = True
    wanted = env.NUM_THREADS.get()
    if wanted > 0 and not env.TVM_NUM_THREADS.is_set():
        from tvm.runtime import _ffi_api  # type: ignore[import-untyped]

        _ffi_api.config_threadpool(1, wanted)


def load(artifact: BuildArtifact) -> Callable[..., Any]:
    _configure_threads()
    return artifact.payload[artifact.entry_name]  # type: ignore[no-any-return]


KERNEL_LIBRARY = "kernel.so"
CODEGEN_FILE = "codegen.json"


def save(artifact: BuildArtifact, directory: pathlib.Path) -> None:
    """Write the built kernel as a shared library (for the kernel cache)."""
    artifact.payload.export_library(str(directory / KERNEL_LIBRARY))
    (directory / CODEGEN_FILE).write_text(json.dumps(llvm_target(artifact.target), sort_keys=True))


def restore(directory: pathlib.Path, target: Target) -> Any:
    """Load what ``save`` wrote; refuses a library built for another CPU than ``target``'s."""
    built_for = json.loads((directory / CODEGEN_FILE).read_text())
    wanted = llvm_target(target)
    if built_for != wanted:
        raise BackendError(f"the library was generated for {built_for}, this target needs {wanted}")
    return tvm.runtime.load_module(str(directory / KERNEL_LIBRARY))


def default_target() -> Target:
    return Target(kind="cpu", arch=host_cpu())
