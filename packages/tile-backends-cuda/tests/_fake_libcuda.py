"""Build ``native/fake_libcuda.cpp``, the C stand-in for libcuda, and a kernel to launch on it
(tests and bench/host_overhead.py)."""

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


def two_outputs_kernel(driver: Any) -> Any:
    """A kernel ``(Y, X, Z, M)`` whose outputs Y (float32) and Z (float16) stand before and after
    its input X (float32), all of a symbolic length M: bind it with ``out_idx=[0, 2]``. Only its
    launch recipe exists (nothing is compiled)."""
    from tile.backends.cuda._src.runtime import CudaKernel
    from tile.ir.gpu import KernelParam, LaunchRecipe

    recipe = LaunchRecipe(
        "split",
        (KernelParam("tensor", "Y", "float32"), KernelParam("tensor", "X", "float32"),
         KernelParam("tensor", "Z", "float16"), KernelParam("scalar", "M", "int32")),
        ("((M + 63) // 64)", "1", "1"), ("64", "1", "1"), "0",
    )  # fmt: skip
    params = [("Y", "float32", ("M",)), ("X", "float32", ("M",)), ("Z", "float16", ("M",))]
    return CudaKernel(b"cubin", recipe, params, driver=driver)
