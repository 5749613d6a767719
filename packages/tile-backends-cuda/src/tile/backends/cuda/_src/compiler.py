"""CUDA source to cubin with nvcc or NVRTC, plus ptxas statistics, PTX and SASS on demand.

``compile_cubin`` runs ``nvcc -ptx`` then ``ptxas -v`` with the package's ``include/``
directory on the include path and reads ptxas' report (registers, spills, stack,
shared memory); without nvcc (or with ``TILE_CUDA_COMPILER=nvrtc``) NVRTC from PyPI
does the same in-process (``_src/nvrtc.py``). Nothing here needs a GPU or a driver.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tile.ir.gpu.headers import INCLUDE_DIR as GPU_INCLUDE_DIR
from tile.ir.toolchain import ToolRunner

from ..errors import ToolchainError, ToolchainNotFoundError
from ..toolchain import find_nvcc
from .cute_headers import include_dirs

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
"""The directory holding ``tile_cuda.h`` (and its ``tile_cuda/`` sub-headers); ``tile_gpu.h``,
which tile_cuda.h includes, is in tile-ir's ``GPU_INCLUDE_DIR``, searched after it."""

_FLAGS = ("-std=c++17", "-O3", "--use_fast_math", "-lineinfo")


@dataclasses.dataclass(frozen=True)
class KernelStats:
    """What ptxas reports for one kernel (``-Xptxas -v``)."""

    registers: int
    """Registers per thread."""
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int
    """Static shared memory of the kernel (dynamic shared memory is the launch's)."""
    barriers: int

    @property
    def spills(self) -> int:
        """Bytes spilled to local memory (stores + loads)."""
        return self.spill_stores + self.spill_loads


_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas_report(text: str) -> KernelStats:
    """Read registers, spills, stack, static shared memory and barriers from ptxas -v output.

    Example::

        >>> parse_ptxas_report(
        ...     "ptxas info    : Used 40 registers, used 1 barriers, 512 bytes smem\\n"
        ...     "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads").spills
        8
    """
    used = _USED.search(text)
    frame = _FRAME.search(text)
    if used is None:
        raise ToolchainError("ptxas printed no register count", hint=f"ptxas output began: {text[:300]!r}")
    stack, stores, loads = (int(x) for x in frame.groups()) if frame else (0, 0, 0)
    return KernelStats(
        registers=int(used[1]),
        spill_stores=stores,
        spill_loads=loads,
        stack_bytes=stack,
        shared_bytes=int(used[3] or 0),
        barriers=int(used[2] or 0),
    )


_run = ToolRunner(
    ToolchainError,
    run_hint="check the CUDA toolkit install",
    failure_hint="kernel.get_kernel_source('cuda') shows the source; TILE_DUMP_IR=<dir> the IR",
)


def _nvcc_command(
    source: Path, output: Path, arch: str, mode: str, text: str = "", flags: Sequence[str] = ()
) -> list[str]:
    nvcc = find_nvcc()
    if not nvcc.supports(arch):
        raise ToolchainError(
            f"nvcc {nvcc.version} at {nvcc.path} cannot compile for {arch}",
            hint="install a newer CUDA toolkit (sm_90a needs CUDA 12.0+)",
        )
    return [
        str(nvcc.path),
        mode,
        f"-arch={arch}",
        *_FLAGS,
        *flags,
        "-I",
        str(INCLUDE_DIR),
        "-I",
        str(GPU_INCLUDE_DIR),
        *(f"-I{folder}" for folder in include_dirs(text)),
        "-o",
        str(output),
        str(source),
    ]


def compiler_choice() -> str:
    """``"nvcc"`` or ``"nvrtc"``: what ``compile_cubin`` uses (``TILE_CUDA_COMPILER``).

    ``auto`` (the default) takes nvcc when it is found, else NVRTC when its wheels load.

    Raises:
        ToolchainNotFoundError: neither is installed (or not the one asked for).
    """
    from .. import env
    from . import nvrtc

    asked = env.TILE_CUDA_COMPILER.get()
    if asked == "nvrtc":
        if nvrtc.available() is None:
            raise ToolchainNotFoundError(
                "TILE_CUDA_COMPILER=nvrtc but NVRTC does not load", hint=nvrtc.INSTALL_HINT
            )
        return "nvrtc"
    if asked == "nvcc":
        find_nvcc()
        return "nvcc"
    try:
        find_nvcc()
        return "nvcc"
    except ToolchainNotFoundError as missing:
        if nvrtc.available() is not None:
            return "nvrtc"
        raise ToolchainNotFoundError(
            f"{missing} and NVRTC is not installed either",
            hint=f"install the CUDA toolkit, or {nvrtc.INSTALL_HINT}",
        ) from None


def compile_cubin(source: str, arch: str, flags: Sequence[str] = ()) -> tuple[bytes, str, KernelStats]:
    """Compile ``source`` for ``arch`` (``"sm_80"``, ``"sm_90a"``): cubin, PTX and ptxas' stats.

    With nvcc: nvcc writes the PTX and ptxas (beside nvcc) assembles it with ``-v``, so
    the PTX costs nothing extra. With NVRTC (``compiler_choice``): one compile for the
    real arch gives both, and ptxas' report comes in the program log. ``flags`` (the kernel's
    ``T.annotate_compile_flags``) follow tile's own flags.

    Raises:
        ToolchainNotFoundError: no nvcc and no NVRTC.
        ToolchainError: the compiler or ptxas rejected the source.
    """
    if compiler_choice() == "nvrtc":
        from . import nvrtc

        folders = [*nvrtc.header_dirs(), *include_dirs(source)]
        cubin, ptx_text, log = nvrtc.compile_program(source, arch, folders, flags)
        return cubin, ptx_text, parse_ptxas_report(log)
    with tempfile.TemporaryDirectory(prefix="tile-cuda-") as tmp:
        src, ptx, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(source)
        _run(_nvcc_command(src, ptx, arch, "-ptx", source, flags), f"nvcc -ptx -arch={arch}")
        ptxas = find_nvcc().path.parent / "ptxas"
        done = _run(
            [str(ptxas), f"-arch={arch}", "-O3", "-v", "-o", str(out), str(ptx)], f"ptxas -arch={arch}"
        )
        return out.read_bytes(), ptx.read_text(), parse_ptxas_report(done.stderr + done.stdout)


def compile_ptx(source: str, arch: str) -> str:
    """The PTX nvcc (or NVRTC, see ``compiler_choice``) generates for ``source`` (for inspection)."""
    if compiler_choice() == "nvrtc":
        return compile_cubin(source, arch)[1]
    with tempfile.TemporaryDirectory(prefix="tile-cuda-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.ptx"
        src.write_text(source)
        _run(_nvcc_command(src, out, arch, "-ptx", source), f"nvcc -ptx -arch={arch}")
        return out.read_text()


def find_cuobjdump() -> Path:
    """``cuobjdump`` next to nvcc, on PATH, or from the ``nvidia-cuda-cuobjdump`` wheel."""
    try:
        beside = find_nvcc().path.parent / "cuobjdump"
        if beside.is_file():
            return beside
    except ToolchainNotFoundError:
        pass
    on_path = shutil.which("cuobjdump")
    if on_path:
        return Path(on_path)
    import sys

    for entry in sys.path:
        for hit in sorted(Path(entry or ".").glob("nvidia/cu*/bin/cuobjdump")):
            return hit
    raise ToolchainNotFoundError(
        "cuobjdump was not found", hint="install the CUDA toolkit or `pip install nvidia-cuda-cuobjdump`"
    )


def disassemble(cubin: bytes) -> str:
    """SASS of a cubin (``cuobjdump -sass``)."""
    return _run.on_bytes(find_cuobjdump(), ["-sass"], cubin, "kernel.cubin", "cuobjdump -sass")
