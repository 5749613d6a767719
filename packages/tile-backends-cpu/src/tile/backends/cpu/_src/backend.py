"""The CPU backend's pipeline, build and load (imported lazily by the manifest)."""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import tvm  # type: ignore[import-untyped]

from tile.ir.annotations import CHECK_OPTION
from tile.ir.backend import BuildArtifact, Capabilities, MmaInstruction, generation_failed, single_kernel
from tile.ir.errors import BackendError
from tile.ir.target import Target

from .. import env
from .device_context import register_pipeline
from .host import core_count, cpu_flags, data_cache_bytes, host_cpu, vector_bits
from .llvm_workarounds import cl_options
from .ukernels import SYMBOLS, UKERNEL_FILE, library_lines, load_for_kernel

if TYPE_CHECKING:
    from tile.ir.transform import Pass

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


AMX_BF16 = MmaInstruction(16, 16, 32, "bfloat16", "float32")
"""One ``tdpbf16ps``: a 16 x 16 float32 tile += 16 x 32 bf16 by 32 x 16 bf16 (ukernels/bf16_gemm.c)."""


def matrix_instructions() -> tuple[MmaInstruction, ...]:
    """The AMX tile product bf16 ``T.gemm`` runs on where the CPU reports AMX-BF16 (and neither
    ``TILE_CPU_AMX`` nor ``TILE_CPU_BF16_UKERNEL`` is off): the carver sizes blocks by it."""
    if env.AMX.get() and env.BF16_UKERNEL.get() and {"amx_bf16", "amx_tile"} <= cpu_flags():
        return (AMX_BF16,)
    return ()


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
        device_name=f"x86 {target.arch or host_cpu()}",
        compute_units=core_count(),
        cache_bytes=data_cache_bytes(),
        mma_instructions=matrix_instructions(),
    )


def pipeline(target: Target) -> Sequence[Pass]:
    # Imported here, not at module level: a cache hit (restore) needs none of the passes.
    from tile.ir.transform import (
        BIND_PARALLEL_LOOPS,
        CHECK_RESOURCES,
        GUARD_GLOBAL_ACCESSES,
        INFER_LAYOUT,
        LEGALIZE_FP8,
        LOWER_HOST_ATOMICS,
        LOWER_TILE_OPS,
        NORMALIZE,
        PLAN_PIPELINE,
        PLAN_STORAGE,
        SERIALIZE_BLOCK_GRID,
        SERIALIZE_PIPELINED_LOOPS,
        SPLIT_DYNAMIC_TAILS,
    )

    from . import lowering as _lowering  # noqa: F401  (registers the CPU rules)
    from . import reduce_lowering as _reduce_lowering  # noqa: F401  (registers the CPU reduce rule)
    from .block_barriers import DROP_BLOCK_BARRIERS
    from .fast_math import INLINE_FAST_EXP
    from .fold_block_columns import FOLD_BLOCK_COLUMNS
    from .fold_k_loop import FOLD_K_LOOP
    from .fuse_fragment_loops import FUSE_FRAGMENT_LOOPS
    from .fuse_vector_nests import FUSE_VECTOR_NESTS
    from .param_alignment import DECLARE_PARAM_ALIGNMENT
    from .prepack_b import PREPACK_B
    from .read_in_place import READ_IN_PLACE
    from .round_bf16 import ROUND_BF16_CASTS
    from .stack_locals import STACK_SMALL_LOCALS
    from .stream_gemm_c import STREAM_GEMM_C
    from .stream_stores import STREAM_STORES

    passes = [
        CHECK_RESOURCES,
        NORMALIZE,
        READ_IN_PLACE,
        FOLD_K_LOOP,
        INFER_LAYOUT,
        PLAN_PIPELINE,
        PLAN_STORAGE,
        LOWER_TILE_OPS,
        LOWER_HOST_ATOMICS,  # a thread's atomic returning the old value: the plain update, blocks in turn
        LEGALIZE_FP8,
        DROP_BLOCK_BARRIERS,
        FUSE_FRAGMENT_LOOPS,
        FOLD_BLOCK_COLUMNS,
        GUARD_GLOBAL_ACCESSES,  # TileLang's rule: a global access outside its tensor does nothing
        SPLIT_DYNAMIC_TAILS,
        SERIALIZE_PIPELINED_LOOPS,
        BIND_PARALLEL_LOOPS,
        FUSE_VECTOR_NESTS,
        SERIALIZE_BLOCK_GRID,
        DECLARE_PARAM_ALIGNMENT,
        INLINE_FAST_EXP,
        STACK_SMALL_LOCALS,
        PREPACK_B,
        STREAM_GEMM_C,
        STREAM_STORES,
        ROUND_BF16_CASTS,
    ]
    # TILE_CHECK=1: every global and shared access tested, reported with its kernel line
    if (target.option(CHECK_OPTION) or "0").startswith("1"):
        from tile.ir.transform.check_bounds import CHECK_BOUNDS, MARK_SOURCE_LINES

        # the checks see the accesses as they run: after the guards TileLang's rule adds
        passes.remove(GUARD_GLOBAL_ACCESSES)
        at = passes.index(LOWER_TILE_OPS)
        passes[at : at + 1] = [MARK_SOURCE_LINES, LOWER_TILE_OPS, GUARD_GLOBAL_ACCESSES, CHECK_BOUNDS]
    return passes


def llvm_target(target: Target) -> dict[str, str]:
    return {"kind": "llvm", "mcpu": target.arch or host_cpu()}


def build(mod: Any, target: Target) -> BuildArtifact:
    name, _func = single_kernel(mod, "CPU")
    try:
        options = cl_options(mod)
        llvm = {**llvm_target(target), "cl-opt": options} if options else llvm_target(target)
        executable = tvm.compile(mod, target=llvm, tir_pipeline=register_pipeline())
    except Exception as exc:
        hint = "set TILE_DUMP_IR=<dir> to inspect the IR handed to LLVM"
        raise generation_failed(exc, "LLVM code generation", name, hint) from exc
    sources = {"tir": mod.script(), "llvm": executable.mod.inspect_source("ll")}
    missing = unresolved_externs(sources["tir"], sources["llvm"])
    if missing:  # LLVM's JIT would hand back a null function: the first call would crash the process
        names = ", ".join(f"`{n}`" for n in missing)
        raise BackendError(
            f"kernel {name} calls {names} (T.call_extern / T.call_pure_extern), which no library "
            "loaded in this process defines",
            hint="define the function in the kernel with T.import_source(c_source), or load its library "
            "with ctypes.CDLL(path, mode=os.RTLD_GLOBAL) before compiling; check the name's spelling",
        )
    return BuildArtifact(target=target, entry_name=name, payload=executable, sources=sources)


_EXTERN_CALL = re.compile(r'T\.call_(?:pure_)?extern\("[^"]*", "([^"]+)"')
_DECLARED = re.compile(r"^declare [^@\n]*@([\w.$]+)\(", re.MULTILINE)


def unresolved_externs(tir_script: str, llvm_source: str) -> list[str]:
    """The functions a kernel calls by name that no library loaded in this process defines.

    Only names the kernel's TIR calls with ``call_extern``/``call_pure_extern`` and its LLVM
    module declares are looked up: libm, ``T.import_source`` libraries and anything loaded
    with ``RTLD_GLOBAL`` are in the process's global namespace; tile's own micro-kernels
    load with their library and are not checked here.
    """
    process = ctypes.CDLL(None)
    declared = set(_DECLARED.findall(llvm_source))
    called = dict.fromkeys(_EXTERN_CALL.findall(tir_script))
    return [n for n in called if n in declared and n not in SYMBOLS and not hasattr(process, n)]


_threads = threading.local()

AFFINITY_SHARE_ALL_CORES = -3
"""TVM's ``kSpecifyThreadShareAllCore``: workers may run on any listed CPU (no pinning)."""


def physical_cores(cpus: Sequence[int]) -> int:
    """How many distinct physical cores the logical ``cpus`` belong to (SMT siblings count once).

    Reads the Linux topology files; where they are missing every logical CPU counts.
    """
    cores = set()
    for cpu in cpus:
        topo = pathlib.Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topo / "physical_package_id").read_text().strip()
            cores.add(f"{package}:{(topo / 'core_id').read_text().strip()}")
        except OSError:
            cores.add(f"cpu{cpu}")
    return max(1, len(cores))


def _configure_threads() -> None:
    """Size the calling thread's TVM worker pool: one worker per physical core.

    TVM's own default halves ``hardware_concurrency`` on x86 to skip hyper-threads, so a
    machine without SMT (most cloud VMs) gets half its cores, and a 2-core one runs every
    kernel's block loop on one thread. The pool and its size are per calling thread in
    TVM; threads that never loaded a kernel keep TVM's default. ``TVM_NUM_THREADS`` (read
    by TVM itself) still wins; ``TILE_CPU_NUM_THREADS`` overrides the core count. Workers
    are not pinned, so the OS can move them off a core another process is busy on.
    """
    if getattr(_threads, "configured", False):
        return
    _threads.configured = True
    if env.TVM_NUM_THREADS.is_set():
        return
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    wanted = env.NUM_THREADS.get() or physical_cores(cpus)
    from tvm.runtime import _ffi_api  # type: ignore[import-untyped]

    _ffi_api.config_threadpool(AFFINITY_SHARE_ALL_CORES, wanted, [str(c) for c in cpus])


def load(artifact: BuildArtifact) -> Callable[..., Any]:
    _configure_threads()
    return artifact.payload[artifact.entry_name]  # type: ignore[no-any-return]


KERNEL_LIBRARY = "kernel.so"
CODEGEN_FILE = "codegen.json"


def save(artifact: BuildArtifact, directory: pathlib.Path) -> None:
    """Write the built kernel as a shared library (for the kernel cache)."""
    artifact.payload.export_library(str(directory / KERNEL_LIBRARY))
    (directory / CODEGEN_FILE).write_text(json.dumps(llvm_target(artifact.target), sort_keys=True))
    # kernel.so leaves C micro-kernel symbols undefined: restore loads their library first.
    listed = library_lines(artifact.sources.get("llvm", ""))
    if listed:
        (directory / UKERNEL_FILE).write_text(listed)


def restore(directory: pathlib.Path, target: Target) -> Any:
    """Load what ``save`` wrote; refuses a library built for another CPU than ``target``'s."""
    built_for = json.loads((directory / CODEGEN_FILE).read_text())
    wanted = llvm_target(target)
    if built_for != wanted:
        raise BackendError(f"the library was generated for {built_for}, this target needs {wanted}")
    load_for_kernel(directory)
    return tvm.runtime.load_module(str(directory / KERNEL_LIBRARY))


def default_target() -> Target:
    return Target(kind="cpu", arch=host_cpu())
