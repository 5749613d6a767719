"""Helpers for the SIMT emulator tests: build a CUDA source, launch it on numpy arrays.

The emulator owns no vendor header: these tests run it with the CUDA vendor's emulated
device (tile-backends-cuda ships ``tile_cuda.h`` for the emulator and registers it as
``"cuda"``), which the CI session of this package installs for its tests.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from tile.backends.cpu.simt import SimtKernel, kernel_library
from tile.backends.cuda.emu import DEVICE as CUDA
from tile.testsupport.markers import needs_host_cxx

needs_cxx = needs_host_cxx


_kernels: dict[tuple[str, str], SimtKernel] = {}


def build(source: str, name: str) -> SimtKernel:
    key = (source, name)
    if key not in _kernels:
        library = kernel_library('#include "tile_cuda.h"\n' + source, name, CUDA)
        _kernels[key] = SimtKernel(library, device=CUDA)
    return _kernels[key]


def launch(
    source: str,
    name: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    *args: Any,
    shared: int = 0,
    **options: Any,
) -> None:
    """Run ``name`` from ``source``; numpy arrays pass their data pointer, ints pass as int32."""
    holders: list[Any] = []
    for arg in args:
        if isinstance(arg, np.ndarray):
            assert arg.flags.c_contiguous
            holders.append(ctypes.c_void_p(arg.ctypes.data))
        else:
            holders.append(ctypes.c_int32(int(arg)))
    build(source, name).launch(grid, block, shared, holders, **options)
