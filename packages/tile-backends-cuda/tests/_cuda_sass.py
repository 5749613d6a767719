"""Test helpers: compile CUDA source to a cubin with the real nvcc and read its SASS.

The disassembler is looked for next to nvcc, on ``PATH``, and in the
``nvidia-cuda-nvdisasm`` wheel (``nvidia/cu*/bin``); tests skip when either tool is
missing. Not shipped: the backend's own SASS inspection lives in its runtime.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tile.backends.cuda import probe_nvcc
from tile.ir.gpu.headers import INCLUDE_DIR as GPU_INCLUDE_DIR

INCLUDE_DIR = Path(__file__).resolve().parents[1] / "src/tile/backends/cuda/include"
NVCC = probe_nvcc()


def find_nvdisasm() -> Path | None:
    """The nvdisasm executable, or ``None``."""
    candidates: list[Path] = []
    if NVCC is not None:
        candidates.append(Path(NVCC.path).resolve().parent / "nvdisasm")
    on_path = shutil.which("nvdisasm")
    if on_path:
        candidates.append(Path(on_path))
    for entry in sys.path:
        candidates.extend(sorted(Path(entry).glob("nvidia/cu[0-9]*/bin/nvdisasm")))
        candidates.append(Path(entry) / "nvidia/cuda_nvdisasm/bin/nvdisasm")
    return next((c for c in candidates if c.is_file()), None)


NVDISASM = find_nvdisasm()
SKIP_REASON = (
    "needs nvcc (probe_nvcc) and nvdisasm (next to nvcc, on PATH, or `pip install nvidia-cuda-nvdisasm`)"
)
HAVE_TOOLS = NVCC is not None and NVDISASM is not None


def compile_cubin(source: str, arch: str, workdir: Path, extra: tuple[str, ...] = ()) -> Path:
    """``nvcc -arch=<arch> -cubin`` on ``source`` with the package's include dir and tile-ir's."""
    assert NVCC is not None
    cu = workdir / "kernel.cu"
    cu.write_text(source)
    cubin = workdir / "kernel.cubin"
    include = (f"-I{INCLUDE_DIR}", f"-I{GPU_INCLUDE_DIR}")
    cmd = [str(NVCC.path), f"-arch={arch}", "-cubin", "-std=c++17", *include, *extra]
    done = subprocess.run([*cmd, "-o", str(cubin), str(cu)], capture_output=True, text=True)
    assert done.returncode == 0, f"nvcc failed:\n{done.stderr}"
    return cubin


_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),", re.M)


def sass_by_kernel(cubin: Path) -> dict[str, str]:
    """The disassembly of each kernel in ``cubin``, by (mangled) name."""
    assert NVDISASM is not None
    text = subprocess.run([str(NVDISASM), str(cubin)], capture_output=True, text=True, check=True).stdout
    marks = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for here, nxt in zip(marks, [*marks[1:], None], strict=True):
        out[here.group(1)] = text[here.end() : nxt.start() if nxt else len(text)]
    return out


def opcodes(sass: str) -> list[str]:
    """Full opcodes (with modifiers) in program order, e.g. ``HMMA.16816.F32``."""
    return re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.x]*)", sass, re.M)
