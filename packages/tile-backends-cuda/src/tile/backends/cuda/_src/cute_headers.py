"""Where ``T.gemm(..., impl="cute")`` kernels find their headers: CUTLASS/CuTe from the
``nvidia-cutlass`` wheel (``cutlass_library/source/include``, found through importlib; nothing
is vendored) and, under the CPU emulator, libcu++ and the host stand-ins in
``emu/cute_emu``. No TVM import: the compiler and the emulator read this.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys

from ..errors import ToolchainError

HEADER = "tile_cuda/cute.h"
"""Included (after ``tile_cuda.h``) by kernels that call ``tile_cute::gemm``."""
CALL_PREFIX = "tile_cute::gemm<"
INSTALL_HINT = "pip install nvidia-cutlass (or pip install 'tile-backends-cuda[cute]')"

EMU_SHIM_DIR = pathlib.Path(__file__).resolve().parent.parent / "emu" / "cute_emu"
"""Host stand-ins for the CUDA toolkit headers CUTLASS includes (``vector_types.h``, ...), put on
the emulator's include path after the emulated device's headers (``emu/include``), for
``impl="cute"`` kernels only."""


def cutlass_include_dir() -> pathlib.Path | None:
    """CUTLASS's ``include/`` folder from the installed ``nvidia-cutlass`` wheel, or ``None``."""
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    folder = pathlib.Path(spec.origin).resolve().parent / "source" / "include"
    return folder if (folder / "cute" / "tensor.hpp").is_file() else None


def uses_cute(source: str) -> bool:
    """Whether a generated kernel source includes ``tile_cuda/cute.h``."""
    return f'#include "{HEADER}"' in source


def _required(folder: pathlib.Path | None, missing: str, hint: str) -> pathlib.Path:
    """``folder``, or the ``ToolchainError`` that says it is ``missing`` and how to install it."""
    if folder is None:
        raise ToolchainError(missing, hint=hint)
    return folder


def include_dirs(source: str) -> list[pathlib.Path]:
    """Extra include folders nvcc/NVRTC need for ``source`` (CUTLASS's, for an impl="cute" kernel)."""
    if not uses_cute(source):
        return []
    return [
        _required(
            cutlass_include_dir(),
            "this kernel uses T.gemm(impl='cute') but the CUTLASS headers are not installed",
            INSTALL_HINT,
        )
    ]


@functools.cache
def _cccl_dir() -> pathlib.Path | None:
    """libcu++ (``cuda/std/...``, which CUTLASS includes) from the nvidia-cuda-cccl wheel or a toolkit."""
    for entry in sys.path:
        for hit in sorted(pathlib.Path(entry or ".").glob("nvidia/cu*/include/cccl")):
            if (hit / "cuda" / "std" / "utility").is_file():
                return hit
    try:
        from ..toolchain import find_nvcc

        home = find_nvcc().path.resolve().parent.parent
    except Exception:  # no toolkit either: reported by emulator_include_dirs
        return None
    for hit in (home / "include" / "cccl", home / "include"):
        if (hit / "cuda" / "std" / "utility").is_file():
            return hit
    return None


def emulator_include_dirs(source: str) -> list[pathlib.Path]:
    """Include folders (after the emulator's own) for running ``source`` under ``TILE_DEVICE=emu``."""
    if not uses_cute(source):
        return []
    cccl = _required(
        _cccl_dir(),
        "emulating a T.gemm(impl='cute') kernel needs libcu++ headers (cuda/std/...) for CUTLASS",
        "pip install nvidia-cuda-cccl, or install the CUDA toolkit",
    )
    from .compiler import INCLUDE_DIR

    return [EMU_SHIM_DIR, INCLUDE_DIR, *include_dirs(source), cccl]


def with_header(source: str) -> str:
    """``source`` with ``#include "tile_cuda/cute.h"`` after its first line when it calls CuTe."""
    if CALL_PREFIX not in source or uses_cute(source):
        return source
    first, _, rest = source.partition("\n")
    return f'{first}\n#include "{HEADER}"\n{rest}'
