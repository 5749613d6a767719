"""CUDA source to cubin with NVRTC from PyPI, for machines without nvcc.

``nvidia-cuda-nvrtc`` (the library) + ``cuda-bindings`` (its Python API) compile; the
device headers the source and ``tile_cuda.h`` include (``cuda_fp16.h``, ``cuda_bf16.h``,
libcu++'s ``cuda/std/*``) come from the ``nvidia-cuda-runtime``, ``nvidia-cuda-crt``
and ``nvidia-cuda-cccl`` wheels (``nvidia/cu*/include`` and its ``cccl/``), or from a
CUDA toolkit's ``include/`` when one is around. One compile for ``-arch=sm_XX`` gives
both the cubin and its PTX; ``-Xptxas=-v`` puts ptxas' report (registers, spills)
into the program log, read like nvcc's.

Which compiler runs is ``compiler.compiler_choice``: nvcc when it is found, else
NVRTC, or whichever ``TILE_CUDA_COMPILER`` names.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tile.ir.gpu.headers import INCLUDE_DIR as GPU_INCLUDE_DIR

from ..errors import ToolchainError, ToolchainNotFoundError

INSTALL_HINT = (
    "pip install nvidia-cuda-nvrtc cuda-bindings nvidia-cuda-runtime nvidia-cuda-crt nvidia-cuda-cccl "
    "(or install the CUDA toolkit for nvcc)"
)
_FLAGS = ("-std=c++17", "--use_fast_math", "-lineinfo", "-Xptxas=-v")


def _module() -> Any:
    try:
        from cuda.bindings import nvrtc  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        try:
            from cuda import nvrtc  # type: ignore[import-not-found, import-untyped, no-redef, unused-ignore]
        except ImportError as exc:
            raise ToolchainNotFoundError(
                "NVRTC's Python bindings are not installed", hint=INSTALL_HINT
            ) from exc
    return nvrtc


def _check(result: Any, what: str) -> Any:
    """``cuda.bindings`` returns ``(status, *values)``: the values, or a ``ToolchainError``."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise ToolchainError(f"NVRTC {what} failed: {status}", hint=INSTALL_HINT)
    return values[0] if len(values) == 1 else values


@functools.cache
def available() -> str | None:
    """``"13.5"`` when NVRTC loads (bindings and library), else None. Never raises."""
    try:
        major, minor = _check(_module().nvrtcVersion(), "nvrtcVersion")
        return f"{major}.{minor}"
    except Exception:
        return None


def supported_archs() -> frozenset[int]:
    """Compute capabilities (``80``, ``90``, ...) this NVRTC compiles for."""
    nvrtc = _module()
    count = _check(nvrtc.nvrtcGetNumSupportedArchs(), "nvrtcGetNumSupportedArchs")
    archs = _check(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
    return frozenset(int(a) for a in list(archs)[: int(count)])


def header_dirs() -> list[Path]:
    """Include directories with ``cuda_fp16.h`` and libcu++ (``cuda/std/cstdint``), wheels first."""
    found: list[Path] = []
    roots = [Path(p or ".") for p in sys.path]
    for root in roots:
        for inc in [*sorted(root.glob("nvidia/cu[0-9]*/include")), root / "nvidia/cuda_runtime/include"]:
            if (inc / "cuda_fp16.h").is_file() and inc not in found:
                found.append(inc)
            cccl = inc / "cccl"
            if (cccl / "cuda/std/cstdint").is_file() and cccl not in found:
                found.append(cccl)
    for var in ("TILE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var, "").strip()
        if home and (Path(home) / "include/cuda_fp16.h").is_file():
            found.append(Path(home) / "include")
    try:
        from ..toolchain import find_nvcc

        inc = find_nvcc().path.resolve().parent.parent / "include"
        if (inc / "cuda_fp16.h").is_file():
            found.append(inc)
    except Exception:
        pass
    if not any((d / "cuda_fp16.h").is_file() for d in found):
        raise ToolchainNotFoundError(
            "NVRTC found no CUDA device headers (cuda_fp16.h)",
            hint="pip install nvidia-cuda-runtime nvidia-cuda-crt nvidia-cuda-cccl",
        )
    return found


def compile_program(
    source: str, arch: str, include_dirs: Sequence[Path], flags: Sequence[str] = ()
) -> tuple[bytes, str, str]:
    """``(cubin, ptx, log)`` of ``source`` for the real arch ``arch`` (``sm_80``, ``sm_90a``).

    Raises:
        ToolchainNotFoundError: NVRTC is not installed.
        ToolchainError: the arch is not supported, or the source does not compile.
    """
    nvrtc = _module()
    digits = arch.removeprefix("sm_").rstrip("a")
    if not digits.isdigit() or int(digits) not in supported_archs():
        raise ToolchainError(
            f"NVRTC {available()} cannot compile for {arch}",
            hint="install a newer nvidia-cuda-nvrtc (sm_90a needs CUDA 12.0+)",
        )
    program = _check(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []), "nvrtcCreateProgram")
    try:
        options = [f"-arch={arch}".encode(), *(f.encode() for f in (*_FLAGS, *flags))]
        folders = (Path(__file__).resolve().parent.parent / "include", GPU_INCLUDE_DIR, *include_dirs)
        options += [f"-I{d}".encode() for d in folders]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
        log_bytes = b" " * int(size)
        _check(nvrtc.nvrtcGetProgramLog(program, log_bytes), "nvrtcGetProgramLog")
        log = log_bytes.rstrip(b"\0 ").decode(errors="replace")
        if int(status) != 0:
            errors = "\n".join(line for line in log.splitlines() if "error" in line.lower())
            raise ToolchainError(
                f"NVRTC -arch={arch} failed ({status}):\n{(errors or log)[:2000]}",
                hint="kernel.get_kernel_source('cuda') shows the source; TILE_DUMP_IR=<dir> the IR",
            )
        cubin = b" " * int(_check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize"))
        _check(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        ptx = b" " * int(_check(nvrtc.nvrtcGetPTXSize(program), "nvrtcGetPTXSize"))
        _check(nvrtc.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
        return cubin, ptx.rstrip(b"\0").decode(), log
    finally:
        nvrtc.nvrtcDestroyProgram(program)
