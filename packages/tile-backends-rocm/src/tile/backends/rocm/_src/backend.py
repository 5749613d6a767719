"""The ROCm backend's capabilities, pass pipeline, build, load and cache files.

Imported lazily by the manifest (``tile.backends.rocm.MANIFEST``). Building needs
apache-tvm and hipcc, never a GPU: the artifact holds the code object, the HIP source
and the launch recipe; only ``load(...)(*args)`` needs a device (or ``TILE_DEVICE=emu``).
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.backend import BuildArtifact, Capabilities, MmaInstruction, single_kernel
from tile.ir.errors import BackendError
from tile.ir.gpu import (
    APPLY_SHARED_LAYOUTS,
    LOWER_GPU_ATOMICS,
    LOWER_SUBBYTE_ACCESSES,
    kernel_params,
    kernel_strides,
)
from tile.ir.gpu import artifact as gpu_artifact
from tile.ir.gpu.artifact import GpuBinary, MachineCode
from tile.ir.gpu.backend import PLANNING_PASSES, generate_device_code, with_kernel_lines
from tile.ir.gpu.barriers import barriers_as_written
from tile.ir.gpu.source_hooks import postprocess_source
from tile.ir.target import Target
from tile.ir.transform import (
    BIND_PARALLEL_LOOPS,
    GUARD_GLOBAL_ACCESSES,
    LOWER_TILE_OPS,
    RASTERIZE_BLOCKS,
    SERIALIZE_PIPELINED_LOOPS,
    SPLIT_DYNAMIC_TAILS,
    CompileContext,
    Pass,
)
from tile.ir.transform.check_resources import check_final_shared
from tile.ir.transform.lower_device_prints import LOWER_DEVICE_PRINTS
from tile.ir.transform.lower_fragments import LOWER_FRAGMENTS

from .. import env
from ..arch import capabilities as arch_capabilities
from ..arch import parse_arch
from ..errors import DeviceLibrariesMissingError
from ..toolchain import APT_PACKAGES, probe_hip_compiler
from . import gemm as _gemm
from . import lds_dma as _lds_dma  # noqa: F401  (global -> LDS copies on LDS DMA, gfx90a/gfx942)
from . import lowering as _lowering  # noqa: F401  (registers the SIMT rules for "hip")
from .codegen import generate_hip
from .compiler import KernelStats, build_code_object, disassemble
from .emulation import EmulatedHipKernel, can_emulate, emulating
from .lds_dma import MERGE_VMEM_WAITS
from .lds_ring import MARK_LDS_RING_STATEMENTS, PIPELINE_LDS_RING
from .runtime import HipKernel, hip_probe

DEFAULT_ARCH = "gfx90a"
MFMA_SHAPE = (16, 16, 16)
"""First in ``mma_shapes``: the shape generic code reads as "the" mma tile. Which MFMA a
gemm uses (and so its accumulator layout) is ``layout_rules.mfma_tiling`` over
``mma_instructions``."""


def arch_of(target: Target) -> str:
    """The target ID of ``target``: ``mcpu`` (TileLang's spelling) or ``arch``; gfx90a by default."""
    spec = target.option("mcpu") or target.arch or DEFAULT_ARCH
    return parse_arch(spec).target_id


def capabilities(target: Target) -> Capabilities:
    caps = arch_capabilities(arch_of(target))
    shapes = [(i.m, i.n, i.k) for i in caps.mfma]
    ordered = (MFMA_SHAPE, *(s for s in dict.fromkeys(shapes) if s != MFMA_SHAPE))
    return Capabilities(
        warp_size=caps.wave_size,
        max_threads=caps.max_threads_per_block,
        shared_bytes=caps.lds_bytes_per_block,
        dtypes=caps.dtypes,
        vector_bits=128,
        has_device=hip_probe() or emulating(),
        devices=("emu",) if can_emulate() else (),
        thread_binding=True,
        async_copy=False,
        mma_shapes=ordered if MFMA_SHAPE in shapes else tuple(dict.fromkeys(shapes)),
        mma_instructions=_gemm.mfma_instructions(
            caps.family,
            [MmaInstruction(i.m, i.n, i.k, i.input_dtype, i.accumulator_dtype) for i in caps.mfma],
        ),
        device_name=f"AMD {caps.arch.processor}",
        gemm_impls=("ck",),  # T.gemm(impl="ck"): composable_kernel's warp gemm (_src/gemm.py)
        compute_units=REFERENCE_CU_COUNT.get(caps.arch.processor, 1),
        max_threads_per_unit=2048,  # 32 waves of 64 lanes per CU (CDNA2/3 ISA: 8 per SIMD, 4 SIMDs)
        registers_per_unit=4 * 512 * 64,  # 4 SIMDs x 512 VGPRs x 64 lanes (unified VGPR/AGPR file)
        registers_per_thread=512,  # 256 architectural VGPRs + 256 AGPRs per lane (CDNA2/3)
        shared_bytes_per_unit=caps.lds_bytes_per_cu,
        emulated=emulating(),
        fast_math_intrinsics=True,  # __expf, __sinf, ... (T.__exp, T.__sin)
        packed_subbyte=True,  # fp4/int4 elements on their bytes (tile.ir.gpu.subbyte_accesses)
    )


REFERENCE_CU_COUNT = {"gfx90a": 104, "gfx942": 304}
"""CUs of each processor's reference product (MI210 has 104, MI300X 304): the count the
autotuner's hints assume for waves."""


PIPELINE: tuple[Pass, ...] = (
    *PLANNING_PASSES,  # check_resources_unplanned ... check_planned_shared (tile.ir.gpu.backend)
    MARK_LDS_RING_STATEMENTS,  # T.Pipelined: statements kept apart through lowering
    LOWER_TILE_OPS,
    GUARD_GLOBAL_ACCESSES,  # TileLang's rule: a global access outside its tensor does nothing
    SPLIT_DYNAMIC_TAILS,
    PIPELINE_LDS_RING,  # LDS DMA rings with vmcnt waits (gfx90a/gfx942)
    MERGE_VMEM_WAITS,  # one vmcnt(0) per run of DMA copies outside rings
    SERIALIZE_PIPELINED_LOOPS,  # the pipelined loops left: load, barrier, compute, barrier
    BIND_PARALLEL_LOOPS,
    LOWER_FRAGMENTS,
    APPLY_SHARED_LAYOUTS,  # after binding: indices simplify per thread and vector
    LOWER_GPU_ATOMICS,
    LOWER_DEVICE_PRINTS,  # T.print: printf of each block's thread 0
    LOWER_SUBBYTE_ACCESSES,  # fp4/int4 loads and stores on their bytes, nibble stores atomic
    RASTERIZE_BLOCKS,  # T.use_swizzle: the block index, permuted into panels
)
"""Every gfx target: the generic tile-ir passes, then the atomic markers as ``tile::atomic_*`` calls.

A global->LDS ``T.copy`` goes over LDS DMA where the arch has it and the target
option ``lds_dma`` allows (``lds_dma.py``, a lowering rule: it runs in
``lower_tile_ops``). A ``T.Pipelined`` loop with ``num_stages >= 2`` whose copies
all went over DMA becomes a multi-stage LDS ring waited for with ``s_waitcnt vmcnt``
(``lds_ring.py``; target option ``lds_ring=0`` turns it off); other pipelined loops
are serialized. The XOR
swizzles ``infer_layout`` gives shared gemm operands are applied to the LDS storage
(``apply_shared_layouts``): they keep the MFMA operand reads at the fewest bank
conflicts the 16-byte chunks allow (``lds.lds_bank_conflicts``).
``python -m tile.backends.rocm --pipeline gfx90a`` prints it.)
"""


def pipeline(target: Target) -> Sequence[Pass]:
    return with_kernel_lines(PIPELINE, target)


@dataclasses.dataclass(kw_only=True)
class HipBinary(GpuBinary):
    """The build payload: code object, HIP source, launch recipe, parameters and stats."""

    code_object: bytes
    stats: KernelStats
    compiler: str = ""
    """``HipCompiler.describe()`` of the compiler that built ``code_object`` ("" for none)."""

    def disassembly(self) -> str:
        """The code object disassembled (``llvm-objdump -d``), under a header naming the compiler."""
        if not self.code_object:
            raise BackendError(
                f"built under TILE_DEVICE=emu without a HIP compiler for {self.arch}: "
                "this kernel has a HIP source, no code object",
                hint=f"install one (apt-get install {APT_PACKAGES}, or ROCm) and rebuild for the disassembly",
            )
        compiler = self.compiler or "an unrecorded compiler"
        head = f"; {self.recipe.kernel_name} for {self.arch}, built by {compiler}\n"
        return head + disassemble(self.code_object)

    # Disassembling costs an llvm-objdump run, so it happens only when asked:
    # ``kernel.get_kernel_source("asm")``.
    disassembly_kind = "asm"
    # the machine code's field and the files of a kernel-cache entry (tile.ir.gpu.artifact)
    machine_code = MachineCode("code_object", "code object", "kernel.co", "kernel.hip", KernelStats)

    def disassemble_payload(self) -> str:
        return self.disassembly()


@functools.cache
def _compiler_present(arch: str, device_libs: bool = False) -> bool:
    return probe_hip_compiler(arch, device_libs) is not None


def _vendor_compile(arch: str, device_libs: bool) -> bool:
    """Whether a build makes a code object: always on a GPU; under TILE_DEVICE=emu only with a
    HIP compiler for it and ``TILE_EMU_VENDOR_COMPILE`` on (there the compile is a check, and
    most of the build's time: 0 leaves it out)."""
    return not emulating() or (env.EMU_VENDOR_COMPILE.get() and _compiler_present(arch, device_libs))


def needs_device_libs(source: str) -> bool:
    """Whether the HIP source calls into ROCm's device libraries: ``printf`` (``T.print``,
    ``T.device_assert``) is ``__ockl_printf_*``; everything else tile_hip.h keeps on builtins."""
    return re.search(r"\bprintf\s*\(", source) is not None


def build(mod: Any, target: Target) -> BuildArtifact:
    name, func = single_kernel(mod, "ROCm")
    arch = arch_of(target)
    mod = barriers_as_written(mod, target)  # pass_configs tl.disable_thread_storage_sync
    source, recipe, device_tir = generate_device_code(generate_hip, mod, arch, name, "HIP")
    source = postprocess_source("hip", source, target)  # a user hook, if any (engine.callback)
    made_by, libs = "", needs_device_libs(source)
    elf, stats = b"", KernelStats(0, 0, 0, 0, 0, 0, 0)  # the code object (an ELF file)
    # Under TILE_DEVICE=emu the emulator runs the source: without a compiler for it the
    # artifact simply has no code object.
    if _vendor_compile(arch, libs):
        try:
            elf, stats, chosen = build_code_object(source, arch, recipe.kernel_name, libs)
            made_by = chosen.describe()
        except DeviceLibrariesMissingError:
            if not emulating():
                raise
    # the launch's LDS as generated (rings, DMA and workspaces included), counted from the IR
    ctx = CompileContext(target, capabilities(target))
    check_final_shared(func, recipe.kernel_name, recipe.dynamic_shared, None, ctx)
    params, strides = kernel_params(func), kernel_strides(func)
    binary = HipBinary(
        arch=arch, code_object=elf, source=source, recipe=recipe, params=params, strides=strides, stats=stats,
        compiler=made_by,
    )  # fmt: skip
    sources = {"tir": mod.script(), "device_tir": device_tir, "hip": source}
    return BuildArtifact(target=target, entry_name=recipe.kernel_name, payload=binary, sources=sources)


def load(artifact: BuildArtifact) -> Callable[..., Any]:
    binary: HipBinary = artifact.payload
    if emulating():  # TILE_DEVICE=emu: the same HIP source, run on the CPU emulator (wave64)
        return EmulatedHipKernel(binary.source, binary.recipe, binary.params, strides=binary.strides)
    if not binary.code_object:
        raise BackendError(
            f"{binary.recipe.kernel_name} was built for TILE_DEVICE=emu without a HIP compiler: "
            "no code object",
            hint=f"rebuild it with a HIP compiler (apt-get install {APT_PACKAGES}, or ROCm) to launch it "
            "on a GPU, or run it with TILE_DEVICE=emu",
        )
    return HipKernel(binary.code_object, binary.recipe, binary.params, strides=binary.strides)


def save(artifact: BuildArtifact, directory: pathlib.Path) -> None:
    """Write the code object, its source and the launch recipe (for the kernel cache)."""
    binary: HipBinary = artifact.payload
    gpu_artifact.write_binary_entry(directory, binary, {}, {"compiler": binary.compiler})


def restore(directory: pathlib.Path, target: Target) -> Any:
    """Read back what ``save`` wrote; refuses a code object built for another gfx target."""
    meta, fields = gpu_artifact.read_binary_entry(directory, HipBinary, arch_of(target))
    wanted = _vendor_compile(meta["arch"], needs_device_libs(fields["source"]))
    gpu_artifact.require_machine_code(meta, HipBinary, wanted, "a HIP compiler")
    return HipBinary(**fields, compiler=str(meta.get("compiler", "")))


def default_target() -> Target:
    return Target(kind="hip", options=(("mcpu", DEFAULT_ARCH),))


DLPACK_ROCM = 10
"""``kDLROCM``: the DLPack device type of ROCm device memory."""


def device_arch(index: int) -> str | None:
    """The gfx arch of ROCm device ``index`` as torch's ROCm build reports it (``gfx90a`` from
    ``gfx90a:sramecc+:xnack-``), or None where torch is not loaded or cannot say. Never raises."""
    torch = sys.modules.get("torch")
    try:
        name = str(torch.cuda.get_device_properties(index).gcnArchName) if torch is not None else ""
    except Exception:
        return None
    return name.split(":")[0] or None


def device_target(device_type: int, index: int) -> Target | None:
    """The target for arrays on DLPack device ``(device_type, index)``: ROCm memory gets the
    gfx arch of that GPU (``gfx90a`` where it cannot be read); other devices are not ours."""
    if device_type != DLPACK_ROCM:
        return None
    return Target(kind="hip", options=(("mcpu", device_arch(index) or DEFAULT_ARCH),))
