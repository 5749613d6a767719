"""An unchecked emulated kernel that touches unmapped memory faults its launch, not the process.

Without ``TILE_CHECK`` an out-of-bounds access is undefined, as on a GPU; a store far outside
any tensor used to be a segmentation fault of the Python process (issue 17). It is now a
``SimtMisuseError`` naming the block and thread, and the next launch runs normally.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _cpu_simt_support import CUDA, needs_cxx

from tile.backends.cpu.simt import SimtKernel, SimtMisuseError, kernel_library

pytestmark = needs_cxx

SOURCE = r"""#include "tile_cuda.h"
// Thread `bad` of block `bad_block` stores 2^40 floats past x; the others scale their element.
extern "C" __global__ void wild_store(float* x, int bad, int bad_block) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  long long far = (blockIdx.x == bad_block && threadIdx.x == bad) ? (1ll << 40) : 0;
  x[i + far] = 2.0f * x[i];
}
"""


def test_a_wild_store_is_a_fault_of_the_launch_and_the_process_goes_on():
    kernel = SimtKernel(kernel_library(SOURCE, "wild_store", CUDA, checked=False), device=CUDA)
    x = np.ones(128, np.float32)
    ptr = ctypes.c_void_p(x.ctypes.data)
    with pytest.raises(SimtMisuseError, match=r"block \(1, 0, 0\): segmentation fault: thread \(5, 0, 0\)"):
        kernel.launch((2, 1, 1), (64, 1, 1), 0, [ptr, ctypes.c_int32(5), ctypes.c_int32(1)], workers=1)
    x[:] = 1.0
    kernel.launch((2, 1, 1), (64, 1, 1), 0, [ptr, ctypes.c_int32(-1), ctypes.c_int32(-1)])  # no fault
    np.testing.assert_array_equal(x, np.full(128, 2.0, np.float32))
