"""Build ``native/fake_libcuda.cpp``, the C stand-in for libcuda (tests and bench/host_overhead.py)."""

from __future__ import annotations

import ctypes
import pathlib
from typing import Any

SOURCE = pathlib.Path(__file__).parent / "native" / "fake_libcuda.cpp"


def build_fake_libcuda(directory: pathlib.Path) -> Any:
    """The stand-in, built with the host compiler into ``directory`` and loaded with ctypes as
    libcuda is; None without a host compiler."""
    from tile.backends.cpu.toolchain import (
        HostCompilerNotFoundError,
        build_shared_library,
        find_host_compiler,
    )

    try:
        cxx = find_host_compiler()
    except HostCompilerNotFoundError:
        return None
    output = directory / "libfakecuda.so"
    built = build_shared_library(cxx, ["-shared", "-fPIC", "-O2", str(SOURCE)], output)
    if built.returncode != 0:
        raise RuntimeError(f"the C stand-in for libcuda did not build:\n{built.stderr}")
    lib = ctypes.CDLL(str(output))
    lib.fake_function_name.restype = ctypes.c_char_p
    lib.fake_loaded_image.restype = ctypes.c_char_p
    lib.fake_current_context.restype = ctypes.c_void_p
    return lib
