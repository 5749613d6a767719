"""Loads every kind of native library the CPU backend keeps in ``TILE_CACHE_DIR`` and uses it.

Run as a separate process by test_cpu_native_cache.py (a damaged library that were mapped
would take the process down); prints the libraries' paths as JSON. Not a test module.
"""

import ctypes
import json

import numpy as np

from tile.backends.cpu._src import ukernels
from tile.backends.cpu.simt import SimtKernel, _toolchain, device_library, kernel_library
from tile.backends.cuda.emu import DEVICE as CUDA

TWICE = """#include "tile_cuda.h"
extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }
"""


def run() -> dict[str, str]:
    kernel = kernel_library(TWICE, "twice", CUDA)
    x = np.arange(32, dtype=np.float32)
    SimtKernel(kernel, device=CUDA).launch((1, 1, 1), (32, 1, 1), 0, [ctypes.c_void_p(x.ctypes.data)])
    np.testing.assert_array_equal(x, 2 * np.arange(32, dtype=np.float32))
    stream = ukernels.library(ukernels.STREAM)
    return {
        "runtime": str(_toolchain.runtime_library()),
        "device": str(device_library(CUDA)),
        "kernel": str(kernel),
        "ukernel": str(stream),
    }


if __name__ == "__main__":
    print(json.dumps(run()))
