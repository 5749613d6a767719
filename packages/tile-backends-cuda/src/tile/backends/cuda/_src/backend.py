"""The CUDA backend's capabilities, pass pipeline, build, load and cache files.

Imported lazily by the manifest (``tile.backends.cuda.MANIFEST``). Building needs
apache-tvm and nvcc, never a GPU: the artifact holds the cubin, the CUDA source and
the launch recipe; only ``load(...)(*args)`` touches the driver.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.annotations import DEVICE_COMPILE_FLAGS
from tile.ir.backend import BuildArtifact, Capabilities, MmaInstruction, single_kernel
from tile.ir.errors import BackendError
from tile.ir.gpu import LOWER_GPU_ATOMICS, LOWER_SUBBYTE_ACCESSES, kernel_params, kernel_strides
from tile.ir.gpu import artifact as gpu_artifact
from tile.ir.gpu.artifact import GpuBinary, MachineCode
from tile.ir.gpu.backend import PLANNING_PASSES, generate_device_code, with_kernel_lines
from tile.ir.gpu.barriers import barriers_as_written
from tile.ir.gpu.source_hooks import postprocess_source
from tile.ir.target import Target
from tile.ir.transform import (
    BIND_PARALLEL_LOOPS,
    GUARD_GLOBAL_ACCESSES,
    LEGALIZE_FP8,
    LOWER_TILE_OPS,
    RASTERIZE_BLOCKS,
    SERIALIZE_PIPELINED_LOOPS,
    SPLIT_DYNAMIC_TAILS,
    CompileContext,
    Pass,
)
from tile.ir.transform.lower_device_prints import LOWER_DEVICE_PRINTS
from tile.ir.transform.lower_fragments import LOWER_FRAGMENTS

from .. import env
from ..arch import capabilities as arch_capabilities
from ..arch import parse_arch
from ..toolchain import probe_nvcc
from . import gemm as _gemm  # noqa: F401  (registers the tensor-core T.gemm rule)
from . import lowering as _lowering  # noqa: F401  (registers the CUDA rules)
from .check_arch_helpers import CHECK_ARCH_HELPERS
from .codegen import generate
from .compiler import KernelStats, compile_cubin, disassemble
from .emulation import EmulatedCudaKernel, can_emulate, check_imported_sources, emulating
from .final_shared import WS_FALLBACK_OPTION, check_launch_shared
from .hopper import APPLY_SHARED_LAYOUTS, WGMMA_FORMS  # importing hopper registers the sm_90a wgmma rule
from .runtime import CudaKernel, driver_probe
from .sm80_lower_async_copies import LOWER_ASYNC_COPIES
from .sm80_mark_pipeline_statements import MARK_PIPELINE_STATEMENTS
from .sm80_pipeline_async_copies import PIPELINE_ASYNC_COPIES
from .sm90a_mark_tma_copies import MARK_TMA_COPIES
from .sm90a_split_producer_warps import SPLIT_PRODUCER_WARPS
from .sm90a_warp_specialize_loop import WARP_SPECIALIZE_LOOP
from .warp_specialize import warp_specialize_requested

DEFAULT_ARCH = "sm_80"
WGMMA_SHAPES = ((64, 256, 16),)
"""Listed first on sm_90a: T.gemm's accumulators then take the warpgroup (wgmma) layout."""


def arch_of(target: Target) -> str:
    """The canonical arch name of ``target``: a target that names none gets the arch of the GPU
    here (``sm_90a`` on an H100: its shared memory and instructions, not sm_80's), else ``sm_80``."""
    return parse_arch(target.arch or _device_arch() or DEFAULT_ARCH).name


def _mma_instructions(wgmma: bool, mma: Sequence[Any]) -> tuple[MmaInstruction, ...]:
    """The forms T.gemm lowers to: wgmma's (``WGMMA_SHAPES`` with the K of each of the hopper rule's
    dtypes, float32 accumulators) where the arch has it, then every mma.sync form with each of its
    accumulators.
    A gemm whose dtypes have no wgmma form gets mma.sync's layouts (``layout_rules.gemm_fragments``)."""
    warpgroup = tuple(
        MmaInstruction(m, n, form.k, dtype, "float32")
        for m, n, _ in WGMMA_SHAPES
        for dtype, form in WGMMA_FORMS.items()
    )
    warp = tuple(
        MmaInstruction(i.m, i.n, i.k, i.input_dtype, acc) for i in mma for acc in i.accumulator_dtypes
    )
    return warpgroup * wgmma + warp


def capabilities(target: Target) -> Capabilities:
    caps = arch_capabilities(arch_of(target))
    driver = driver_probe()
    return Capabilities(
        warp_size=caps.warp_size,
        max_threads=caps.max_threads_per_block,
        shared_bytes=caps.shared_bytes_per_block,
        dtypes=caps.dtypes,
        vector_bits=128,
        has_device=driver or emulating(),
        thread_binding=True,
        async_copy=caps.async_copy,
        mma_shapes=WGMMA_SHAPES * caps.wgmma + tuple(dict.fromkeys((i.m, i.n, i.k) for i in caps.mma)),
        mma_instructions=_mma_instructions(caps.wgmma, caps.mma),
        # "gpu" is the native device, named so that --tile-device=gpu selects it explicitly
        devices=("emu",) * can_emulate() + ("gpu",) * driver,
        # float32 T.gemm runs on mma.m16n8k8.tf32 (sm_80+), as in TileLang
        float32_gemm="tfloat32" if any(i.input_dtype == "float32" for i in caps.mma) else "float32",
        # T.gemm(impl="cute"): CuTe's gemm over mma.sync (needs the nvidia-cutlass headers)
        gemm_impls=("cute",) if caps.mma else (),
        matrix_store=caps.stmatrix,
        warp_matrix_calls=caps.ldmatrix and bool(caps.mma),  # T.ptx_ldmatrix / T.ptx_mma
        device_name=f"NVIDIA {caps.arch.name}",
        compute_units=_device_sm_count(caps.arch.name) or REFERENCE_SM_COUNT.get(caps.arch.name, 1),
        max_threads_per_unit=caps.max_threads_per_sm,
        registers_per_unit=caps.registers_per_sm,
        registers_per_thread=caps.max_registers_per_thread,
        shared_bytes_per_unit=caps.shared_bytes_per_sm,
        emulated=emulating(),
        imported_sources="device",  # T.import_source: CUDA C++ printed into the kernel's source
        fast_math_intrinsics=True,  # __expf, __sinf, ... (T.__exp, T.__sin)
        packed_subbyte=True,  # fp4/int4 elements on their bytes (tile.ir.gpu.subbyte_accesses)
    )


REFERENCE_SM_COUNT = {"sm_75": 40, "sm_80": 108, "sm_86": 82, "sm_89": 128, "sm_90": 132, "sm_90a": 132}
"""SMs of each arch's first listed product (T4, A100, RTX 3090, RTX 4090, H100 SXM): the count the
autotuner's hints assume for waves when no device of that arch is here to ask."""


@functools.cache
def _device_sm_count(arch: str) -> int:
    """SMs of device 0 through the driver when it is of ``arch``, else 0. Never raises."""
    import ctypes

    if _device_arch() != arch:
        return 0
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
        return count.value if lib.cuDeviceGetAttribute(ctypes.byref(count), 16, 0) == 0 else 0
    except Exception:
        return 0


SM80_PIPELINE: tuple[Pass, ...] = (
    CHECK_ARCH_HELPERS,  # expert-tier calls (mbarriers, proxy fences) the arch has
    *PLANNING_PASSES,  # check_resources_unplanned ... check_planned_shared (tile.ir.gpu.backend)
    MARK_PIPELINE_STATEMENTS,  # T.Pipelined: statements kept apart through lowering
    LOWER_TILE_OPS,
    LEGALIZE_FP8,
    GUARD_GLOBAL_ACCESSES,  # TileLang's rule: a global access outside its tensor does nothing
    SPLIT_DYNAMIC_TAILS,
    PIPELINE_ASYNC_COPIES,  # cp.async rings with commit/wait groups
    SERIALIZE_PIPELINED_LOOPS,  # the pipelined loops left: load, barrier, compute, barrier
    BIND_PARALLEL_LOOPS,
    LOWER_FRAGMENTS,
    LOWER_GPU_ATOMICS,
    LOWER_DEVICE_PRINTS,  # T.print: printf of each block's thread 0
    APPLY_SHARED_LAYOUTS,  # swizzled shared tiles: ldmatrix on distinct banks
    LOWER_SUBBYTE_ACCESSES,  # fp4/int4 loads and stores on their bytes, nibble stores atomic
    LOWER_ASYNC_COPIES,  # the ring's vectorized producer copies become cp.async
    RASTERIZE_BLOCKS,  # T.use_swizzle; last: nothing after it may read blockIdx as the block
)
"""sm_75, sm_80, sm_86, sm_89 and sm_90 (every arch without wgmma; sm_75 has no cp.async, so its
T.Pipelined loops copy with plain loads and stores, one step after the other)."""

SM90A_PIPELINE: tuple[Pass, ...] = (
    CHECK_ARCH_HELPERS,  # setmaxnreg on sm_90 (no wgmma) is refused before lowering
    *PLANNING_PASSES,  # check_resources_unplanned ... check_planned_shared (tile.ir.gpu.backend)
    MARK_PIPELINE_STATEMENTS,  # T.Pipelined: statements kept apart through lowering
    MARK_TMA_COPIES,  # a qualifying loop's producer copies become TMA tiles
    LOWER_TILE_OPS,  # T.gemm on wgmma where it can
    LEGALIZE_FP8,
    GUARD_GLOBAL_ACCESSES,  # TileLang's rule: a global access outside its tensor does nothing
    SPLIT_DYNAMIC_TAILS,
    WARP_SPECIALIZE_LOOP,  # producer (TMA) and consumer loops over an mbarrier ring
    PIPELINE_ASYNC_COPIES,  # the other pipelined loops: cp.async rings
    SERIALIZE_PIPELINED_LOOPS,  # the pipelined loops left: load, barrier, compute, barrier
    BIND_PARALLEL_LOOPS,
    LOWER_FRAGMENTS,
    LOWER_GPU_ATOMICS,
    LOWER_DEVICE_PRINTS,  # T.print: printf of each block's thread 0
    APPLY_SHARED_LAYOUTS,  # swizzled shared tiles, as wgmma descriptors and TMA boxes read them
    LOWER_SUBBYTE_ACCESSES,  # fp4/int4 loads and stores on their bytes, nibble stores atomic
    LOWER_ASYNC_COPIES,  # the ring's vectorized producer copies become cp.async
    SPLIT_PRODUCER_WARPS,  # the producer warpgroup, mbarrier init, setmaxnreg
    RASTERIZE_BLOCKS,  # T.use_swizzle; last: nothing after it may read blockIdx as the block
)
"""sm_90a. The warp-specialization passes do nothing where the kernel or
``TILE_CUDA_WARP_SPECIALIZE=0`` turns it off; the pipeline is then sm_80's."""

PIPELINES: dict[str, tuple[Pass, ...]] = {"sm_80": SM80_PIPELINE, "sm_90a": SM90A_PIPELINE}
"""Arch family -> its pipeline (``python -m tile.backends.cuda --pipeline sm_90a`` prints one)."""


def arch_family(arch: str) -> str:
    """The key of ``PIPELINES`` for ``arch``: ``sm_90a`` where wgmma exists, else ``sm_80``."""
    return "sm_90a" if arch_capabilities(parse_arch(arch).name).wgmma else "sm_80"


def pipeline(target: Target) -> Sequence[Pass]:
    return with_kernel_lines(PIPELINES[arch_family(arch_of(target))], target)


@dataclasses.dataclass(kw_only=True)
class CudaBinary(GpuBinary):
    """The build payload: cubin, source, launch recipe, parameters and ptxas stats."""

    cubin: bytes
    stats: KernelStats
    ptx: str = ""
    """The PTX the cubin came from: the driver JIT-compiles it where the cubin's arch does not run
    (an sm_80 kernel on an sm_90 device)."""

    def sass(self) -> str:
        """The cubin disassembled (``cuobjdump -sass``)."""
        if not self.cubin:
            raise BackendError(
                "this kernel was built under TILE_DEVICE=emu without nvcc: it has a CUDA source, no cubin",
                hint="install nvcc (or nvidia-cuda-nvcc from PyPI) and rebuild to get SASS",
            )
        return disassemble(self.cubin)

    # Disassembling costs a cuobjdump run (~0.3-0.8 s), so it happens only when asked:
    # ``kernel.get_kernel_source("sass")``.
    disassembly_kind = "sass"
    # the machine code's field and the files of a kernel-cache entry (tile.ir.gpu.artifact)
    machine_code = MachineCode("cubin", "cubin", "kernel.cubin", "kernel.cu", KernelStats)

    def disassemble_payload(self) -> str:
        return self.sass()


@functools.cache
def _nvcc_found(_where: tuple[str | None, ...]) -> bool:
    return probe_nvcc() is not None


def _nvcc_present() -> bool:
    """Whether nvcc can be found (asked once per setting of the variables that locate it)."""
    keys = ("TILE_NVCC", "TILE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH", "PATH")
    return _nvcc_found(tuple(os.environ.get(k) for k in keys))


def _emulated_without_cubin() -> bool:
    """Whether a build runs the source on the emulator only, with no cubin: under TILE_DEVICE=emu
    without nvcc, or with ``TILE_EMU_VENDOR_COMPILE=0`` (nvcc's compile is a check there, and
    most of the build's time)."""
    return emulating() and not (env.EMU_VENDOR_COMPILE.get() and _nvcc_present())


def build(mod: Any, target: Target) -> BuildArtifact:
    name, func = single_kernel(mod, "CUDA")
    arch = arch_of(target)
    mod = barriers_as_written(mod, target)  # pass_configs tl.disable_thread_storage_sync
    source, recipe, device_tir = generate_device_code(generate, mod, arch, name, "CUDA")
    source = postprocess_source("cuda", source, target)  # a user hook, if any (engine.callback)
    if _emulated_without_cubin():
        # the emulator runs the source: without nvcc (or its check) the artifact simply has no cubin
        cubin, ptx, stats = b"", "", KernelStats(0, 0, 0, 0, 0, 0)
    else:
        flags = json.loads(target.option(DEVICE_COMPILE_FLAGS) or "[]")  # T.annotate_compile_flags
        cubin, ptx, stats = compile_cubin(source, arch, flags)
    if emulating():  # after nvcc's check of the source: inline PTX the CPU cannot assemble
        check_imported_sources(func, recipe.kernel_name, arch)
    # the launch's shared memory, as generated (after every ring and warp specialization)
    ctx = CompileContext(target, capabilities(target))
    static = stats.shared_bytes if cubin else None  # ptxas's count, else the final IR's
    check_launch_shared(func, recipe.kernel_name, recipe.dynamic_shared, static, ctx)
    params, strides = kernel_params(func), kernel_strides(func)
    binary = CudaBinary(
        arch=arch, cubin=cubin, source=source, recipe=recipe, params=params, strides=strides, stats=stats,
        ptx=ptx,
    )  # fmt: skip
    sources = {"tir": mod.script(), "device_tir": device_tir, "cuda": source, "ptx": ptx}
    return BuildArtifact(target=target, entry_name=recipe.kernel_name, payload=binary, sources=sources)


def load(artifact: BuildArtifact) -> Callable[..., Any]:
    binary: CudaBinary = artifact.payload
    if emulating():  # TILE_DEVICE=emu: the same CUDA source, run on the CPU emulator
        return EmulatedCudaKernel(binary.source, binary.recipe, binary.params, strides=binary.strides)
    if not binary.cubin:
        raise BackendError(
            f"kernel {binary.recipe.kernel_name} was built under TILE_DEVICE=emu without nvcc (no cubin)",
            hint="rebuild it with nvcc installed to launch it on a GPU, or run it with TILE_DEVICE=emu",
        )
    return CudaKernel(binary.cubin, binary.recipe, binary.params, ptx=binary.ptx, strides=binary.strides)


PTX_FILE = "kernel.ptx"


def save(artifact: BuildArtifact, directory: pathlib.Path) -> None:
    """Write the cubin, its source and PTX and the launch recipe (for the kernel cache)."""
    binary: CudaBinary = artifact.payload
    # the env var is not part of the cache key, so the setting travels with the entry
    warp_specialize = warp_specialize_requested(artifact.target) or bool(
        artifact.target.option(WS_FALLBACK_OPTION)
    )  # a fallback build answers for the setting that asked for warp specialization
    gpu_artifact.write_binary_entry(
        directory, binary, {PTX_FILE: binary.ptx}, {"warp_specialize": warp_specialize}
    )


def restore(directory: pathlib.Path, target: Target) -> Any:
    """Read back what ``save`` wrote; refuses a cubin built for another arch than ``target``'s."""
    meta, fields = gpu_artifact.read_binary_entry(directory, CudaBinary, arch_of(target))
    if bool(meta.get("warp_specialize", False)) != warp_specialize_requested(target):
        raise BackendError("the cubin was built with another TILE_CUDA_WARP_SPECIALIZE setting")
    gpu_artifact.require_machine_code(meta, CudaBinary, not _emulated_without_cubin(), "nvcc")
    ptx = directory / PTX_FILE
    return CudaBinary(**fields, ptx=ptx.read_text() if ptx.exists() else "")


def default_target() -> Target:
    return Target(kind="cuda", arch=_device_arch() or DEFAULT_ARCH)


DLPACK_CUDA = 2
"""``kDLCUDA``: the DLPack device type of CUDA device memory."""


def device_target(device_type: int, index: int) -> Target | None:
    """The target for arrays on DLPack device ``(device_type, index)``: CUDA memory gets the
    arch of that GPU (``sm_80`` where the driver cannot say); other devices are not ours."""
    if device_type != DLPACK_CUDA:
        return None
    return Target(kind="cuda", arch=device_arch(index) or DEFAULT_ARCH)


def _device_arch() -> str | None:
    """``sm_XY`` of device 0 through the driver (``sm_90a`` for 9.0), or None. Never raises."""
    return device_arch(0)


@functools.cache
def device_arch(index: int) -> str | None:
    """``sm_XY`` of CUDA device ``index`` through the driver (``sm_90a`` for 9.0), or None.
    Never raises."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuInit(0) != 0:
            return None
        device = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(device), index) != 0:
            return None
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
        if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, device) or lib.cuDeviceGetAttribute(
            ctypes.byref(minor), 76, device
        ):
            return None
        name = f"sm_{major.value}{minor.value}" + ("a" if (major.value, minor.value) == (9, 0) else "")
        arch_capabilities(name)
        return name
    except Exception:
        return None
