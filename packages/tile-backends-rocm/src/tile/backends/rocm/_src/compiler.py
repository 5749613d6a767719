"""HIP source to an AMDGPU code object; disassembly and register stats on demand.

``compile_code_object`` runs the compiler ``toolchain.select_hip_compiler`` picks for the
arch (ROCm's amdclang++ / hipcc, a plain clang++-N with lld, or Debian's hipcc) with
``HIP_PLATFORM=amd`` (``toolchain.hip_environment``) and the package's ``include/`` folder
on the include path: ``hipcc --genco --offload-arch=<gfx> --no-gpu-bundle-output``, or
``clang++ -x hip --offload-arch=<gfx> --cuda-device-only -c --no-gpu-bundle-output``
(``-nogpulib`` where there are no device libraries). The result is the plain ELF code
object (no clang offload bundle), which ``hipModuleLoadData`` loads. Nothing here needs a GPU.

The kernel's resource use is read from the code object's AMDGPU metadata note
(``llvm-readelf --notes``: ``.vgpr_count``, ``.sgpr_count``, ``.agpr_count``, the spill
counts, LDS and scratch bytes); the disassembly comes from ``llvm-objdump -d``.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import re
import shutil
import tempfile
from pathlib import Path

from tile.ir.gpu.headers import INCLUDE_DIR as GPU_INCLUDE_DIR
from tile.ir.toolchain import ToolRunner

from ..errors import DeviceLibrariesMissingError, ToolchainError, ToolchainNotFoundError
from ..toolchain import HipCompiler, find_hipcc, hip_environment, probe_hip_compiler, select_hip_compiler
from .ck_headers import include_flags

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
"""The directory holding ``tile_hip.h`` (and its ``tile_hip/`` sub-headers); ``tile_gpu.h``,
which tile_hip.h includes, is in tile-ir's ``GPU_INCLUDE_DIR``, searched after it."""

_FLAGS = ("-std=c++17", "-O3", "-ffast-math", "--no-gpu-bundle-output")


@dataclasses.dataclass(frozen=True)
class KernelStats:
    """What the code object's metadata says about one kernel."""

    vgprs: int
    """Vector registers per lane (``.vgpr_count``)."""
    sgprs: int
    agprs: int
    vgpr_spills: int
    sgpr_spills: int
    lds_bytes: int
    """Static LDS of the kernel (the group segment; dynamic LDS is the launch's)."""
    scratch_bytes: int

    @property
    def spills(self) -> int:
        """Registers spilled to scratch memory (VGPR + SGPR)."""
        return self.vgpr_spills + self.sgpr_spills


_NOTE_FIELDS = {
    "vgprs": ".vgpr_count",
    "sgprs": ".sgpr_count",
    "agprs": ".agpr_count",
    "vgpr_spills": ".vgpr_spill_count",
    "sgpr_spills": ".sgpr_spill_count",
    "lds_bytes": ".group_segment_fixed_size",
    "scratch_bytes": ".private_segment_fixed_size",
}


def parse_kernel_notes(text: str, kernel_name: str) -> KernelStats:
    """Read one kernel's resource counts from ``llvm-readelf --notes`` output.

    Example::

        >>> parse_kernel_notes(
        ...     "  - .agpr_count: 4\\n    .name: k\\n    .sgpr_count: 8\\n"
        ...     "    .sgpr_spill_count: 0\\n    .vgpr_count: 12\\n    .vgpr_spill_count: 2\\n", "k"
        ... ).spills
        2
    """
    # Each kernel's map starts with "- " in the amdhsa.kernels list; find the one named kernel_name.
    blocks = re.split(r"\n\s*- (?=\.)", "\n" + text)
    for block in blocks:
        name = re.search(r"^\s*\.name:\s*(\S+)\s*$", block, re.MULTILINE)
        if name is None or name.group(1) != kernel_name:
            continue
        values: dict[str, int] = {}
        for field, key in _NOTE_FIELDS.items():
            found = re.search(rf"^\s*{re.escape(key)}:\s*(\d+)\s*$", "\n" + block.lstrip(), re.MULTILINE)
            values[field] = int(found.group(1)) if found else 0
        return KernelStats(**values)
    raise ToolchainError(
        f"the code object's metadata has no kernel named {kernel_name}",
        hint=f"llvm-readelf --notes printed: {text[:300]!r}",
    )


_run = ToolRunner(
    ToolchainError,
    run_hint="check the ROCm / hipcc install",
    failure_hint="kernel.get_kernel_source('hip') shows the source; TILE_DUMP_IR=<dir> the IR",
    environment=hip_environment,
)


def compile_code_object(
    source: str, arch: str, kernel_name: str, compiler: HipCompiler | None = None
) -> tuple[bytes, KernelStats]:
    """Compile ``source`` for ``arch`` (a gfx target ID): the ELF code object and its stats.

    ``compiler`` defaults to ``select_hip_compiler(arch)``.

    Raises:
        ToolchainNotFoundError: nothing here builds ``arch`` (the message names what would),
            or no llvm-readelf for the stats.
        ToolchainError: the compiler rejected the source (clang's message is kept).
    """
    compiler = compiler or select_hip_compiler(arch)
    with tempfile.TemporaryDirectory(prefix="tile-hip-") as tmp:
        src, out = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.co"
        src.write_text(source)
        flags = (*_FLAGS, "-I", str(INCLUDE_DIR), "-I", str(GPU_INCLUDE_DIR), *include_flags(source))
        cmd = compiler.command(arch, src, out, flags)
        _run(cmd, f"{compiler.kind} --offload-arch={arch} ({compiler.path})")
        code = out.read_bytes()
        return code, kernel_stats(code, kernel_name)


_MISSING = re.compile(r"undefined (?:hidden )?symbol: (__oc[km]l_\w+)")


def build_code_object(
    source: str, arch: str, kernel_name: str, device_libs: bool = False
) -> tuple[bytes, KernelStats, HipCompiler]:
    """:func:`compile_code_object` with the compiler ``select_hip_compiler`` picks, and that compiler.

    Where a compiler without device libraries fails to link a device-library function (HIP's
    ``sinf`` is ``__ocml_sin_f32``), the build is retried with one that has them.

    Raises:
        DeviceLibrariesMissingError: the kernel needs the device libraries and no compiler
            here that builds ``arch`` has them (the message names the functions).
        ToolchainNotFoundError, ToolchainError: as :func:`compile_code_object`.
    """
    compiler = select_hip_compiler(arch, device_libs)
    try:
        code, stats = compile_code_object(source, arch, kernel_name, compiler)
    except ToolchainError as exc:
        missing = sorted(set(_MISSING.findall(str(exc))))
        if compiler.device_libs or not missing:
            raise
        fallback = probe_hip_compiler(arch, device_libs=True)
        if fallback is None:
            raise DeviceLibrariesMissingError(
                f"{kernel_name} calls ROCm device-library functions ({', '.join(missing)}), and "
                f"{compiler.describe()} builds {arch} without them",
                hint="install ROCm (amdclang++ links them), or use the functions tile_hip.h keeps on "
                "builtins (expf, exp2f, logf, sqrtf, rsqrtf, tanhf, erff, fabsf, ...)",
            ) from exc
        compiler = fallback
        code, stats = compile_code_object(source, arch, kernel_name, compiler)
    return code, stats, compiler


@functools.cache
def find_llvm_tool(name: str) -> Path:
    """``llvm-objdump`` / ``llvm-readelf``: beside hipcc's ROCm LLVM, the newest versioned one
    (``llvm-objdump-19``: an older unversioned one may not know gfx942), or the one on PATH.

    Raises:
        ToolchainNotFoundError: none is installed.
    """
    try:
        root = find_hipcc().path.resolve().parent.parent
        for candidate in (root / "llvm" / "bin" / name, root / "lib" / "llvm" / "bin" / name):
            if candidate.is_file():
                return candidate
    except (ToolchainNotFoundError, ToolchainError):
        pass
    versioned = sorted(glob.glob(f"/usr/bin/{name}-[0-9]*"), key=lambda p: int(p.rsplit("-", 1)[1]))
    if versioned:
        return Path(versioned[-1])
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    raise ToolchainNotFoundError(
        f"{name} was not found", hint=f"install LLVM (apt-get install llvm) or ROCm, which ship {name}"
    )


def kernel_stats(code: bytes, kernel_name: str) -> KernelStats:
    """Registers, spills, LDS and scratch of ``kernel_name`` in an ELF code object."""
    readelf = find_llvm_tool("llvm-readelf")
    notes = _run.on_bytes(readelf, ["--notes"], code, "kernel.co", "llvm-readelf --notes")
    return parse_kernel_notes(notes, kernel_name)


def disassemble(code: bytes) -> str:
    """The GCN/CDNA assembly of a code object (``llvm-objdump -d``)."""
    return _run.on_bytes(find_llvm_tool("llvm-objdump"), ["-d"], code, "kernel.co", "llvm-objdump -d")


@functools.cache
def compiler_supports(arch: str) -> tuple[bool, str]:
    """Whether a compiler here builds code objects for ``arch`` and an llvm-objdump here
    disassembles them, and why not when not.

    Compiles and disassembles an empty kernel once per arch (cached); for test skips.
    """
    try:
        code, _stats = compile_code_object('extern "C" __global__ void tile_probe() {}\n', arch, "tile_probe")
        disassemble(code)
    except (ToolchainNotFoundError, ToolchainError) as exc:
        return False, str(exc).strip()[:600]
    return True, ""
