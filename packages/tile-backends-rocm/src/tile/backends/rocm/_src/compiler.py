"""HIP source to an AMDGPU code object with hipcc; disassembly and register stats on demand.

``compile_code_object`` runs ``hipcc --genco --offload-arch=<gfx> --no-gpu-bundle-output``
(with ``HIP_PLATFORM=amd``, see ``toolchain.hip_environment``) and the package's
``include/`` folder on the include path. The result is the plain ELF code object (no
clang offload bundle), which ``hipModuleLoadData`` loads. Nothing here needs a GPU.

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
import subprocess
import tempfile
from pathlib import Path

from tile.ir.toolchain import run_tool

from ..errors import ToolchainError, ToolchainNotFoundError
from ..toolchain import find_hipcc, hip_environment

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
"""The directory holding ``tile_hip.h`` (and its ``tile_hip/`` sub-headers)."""

_COMPILE_TIMEOUT_S = 300.0
_FLAGS = ("-std=c++17", "-O3", "-ffast-math", "--no-gpu-bundle-output")


@dataclasses.dataclass(frozen=True)
class KernelStats:
    """What the code object's metadata says about one kernel."""

    vgprs: int
    sgprs: int
    agprs: int
    vgpr_spills: int
    sgpr_spills: int
    lds_bytes: int
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


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    return run_tool(
        cmd,
        what,
        error=ToolchainError,
        timeout=_COMPILE_TIMEOUT_S,
        run_hint="check the ROCm / hipcc install",
        failure_hint="kernel.get_kernel_source('hip') shows the source; TILE_DUMP_IR=<dir> the IR",
        env=hip_environment(),
    )


def compile_code_object(source: str, arch: str, kernel_name: str) -> tuple[bytes, KernelStats]:
    """Compile ``source`` for ``arch`` (a gfx target ID): the ELF code object and its stats.

    Raises:
        ToolchainNotFoundError: no hipcc (or no llvm-readelf for the stats).
        ToolchainError: hipcc rejected the source or the target (clang's message is kept:
            an older clang answers ``invalid target ID 'gfx942'``).
    """
    hipcc = find_hipcc()
    with tempfile.TemporaryDirectory(prefix="tile-hip-") as tmp:
        src, out = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.co"
        src.write_text(source)
        cmd = [str(hipcc.path), "--genco", f"--offload-arch={arch}", *_FLAGS, "-I", str(INCLUDE_DIR)]
        _run([*cmd, "-o", str(out), str(src)], f"hipcc --offload-arch={arch}")
        code = out.read_bytes()
        return code, kernel_stats(code, kernel_name)


@functools.cache
def find_llvm_tool(name: str) -> Path:
    """``llvm-objdump`` / ``llvm-readelf``: beside hipcc's ROCm LLVM, on PATH, or a versioned one.

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
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    versioned = sorted(glob.glob(f"/usr/bin/{name}-[0-9]*"), key=lambda p: int(p.rsplit("-", 1)[1]))
    if versioned:
        return Path(versioned[-1])
    raise ToolchainNotFoundError(
        f"{name} was not found", hint=f"install LLVM (apt-get install llvm) or ROCm, which ship {name}"
    )


def kernel_stats(code: bytes, kernel_name: str) -> KernelStats:
    """Registers, spills, LDS and scratch of ``kernel_name`` in an ELF code object."""
    tool = find_llvm_tool("llvm-readelf")
    with tempfile.TemporaryDirectory(prefix="tile-hip-") as tmp:
        path = Path(tmp) / "kernel.co"
        path.write_bytes(code)
        notes = _run([str(tool), "--notes", str(path)], "llvm-readelf --notes").stdout
    return parse_kernel_notes(notes, kernel_name)


def disassemble(code: bytes) -> str:
    """The GCN/CDNA assembly of a code object (``llvm-objdump -d``)."""
    tool = find_llvm_tool("llvm-objdump")
    with tempfile.TemporaryDirectory(prefix="tile-hip-") as tmp:
        path = Path(tmp) / "kernel.co"
        path.write_bytes(code)
        return _run([str(tool), "-d", str(path)], "llvm-objdump -d").stdout


@functools.cache
def hipcc_supports(arch: str) -> tuple[bool, str]:
    """Whether the installed hipcc builds code for ``arch``, and clang's answer when not.

    Compiles an empty kernel once per arch (cached); for test skips and clear errors.
    """
    try:
        compile_code_object('extern "C" __global__ void tile_probe() {}\n', arch, "tile_probe")
    except (ToolchainNotFoundError, ToolchainError) as exc:
        lines = [line for line in str(exc).splitlines() if "error" in line.lower()]
        return False, (lines[-1] if lines else str(exc)).strip()[:300]
    return True, ""
