"""Access checks of the SIMT emulator (TILE_EMU_CHECK): bounds of global and shared memory, races.

Kernels built with checks call the runtime on every load and store; a fault names the
tensor or shared offset, the threads and the kernel's source line. The same kernels
built without checks run silently (the bugs would go unseen), which is what each test
contrasts.
"""

from __future__ import annotations

import ctypes
import shutil

import numpy as np
import pytest
from _cpu_simt_support import CUDA, needs_cxx

from tile.backends.cpu.simt import SimtKernel, SimtMisuseError, SimtRaceError, kernel_library

pytestmark = needs_cxx

SOURCE = r"""#include "tile_cuda.h"
// One element past the end of x when `extra` is 1.
extern "C" __global__ void copy_past_end(const float* x, float* y, int n, int extra) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n + extra) y[i < n ? i : 0] = x[i];
}

// A write `over` bytes past the block's dynamic shared memory.
extern "C" __global__ void shared_overrun(float* out, int over) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* s = (float*)smem;
  int t = threadIdx.x;
  s[t + over] = (float)t;
  __syncthreads();
  out[t] = s[t];
}

// Each thread reads its neighbour's slot; `barrier` 0 leaves out the __syncthreads.
extern "C" __global__ void neighbour_swap(int* out, int barrier) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* s = (int*)smem;
  int t = threadIdx.x;
  s[t] = t;
  if (barrier) __syncthreads();
  out[t] = s[t ^ 1];
}
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SOURCE.splitlines(), 1) if text in line)


def _kernel(name: str, checked: bool) -> SimtKernel:
    return SimtKernel(kernel_library(SOURCE, name, CUDA, checked=checked), device=CUDA)


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def test_out_of_bounds_global_read_names_tensor_and_line():
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, np.float32)
    tensors = [("x", x.ctypes.data, x.nbytes), ("y", y.ctypes.data, y.nbytes)]
    args = [_ptr(x), _ptr(y), ctypes.c_int32(100), ctypes.c_int32(0)]
    _kernel("copy_past_end", True).launch((4, 1, 1), (32, 1, 1), 0, args, tensors=tensors)
    np.testing.assert_array_equal(y, x)
    args[3] = ctypes.c_int32(1)
    _kernel("copy_past_end", False).launch((4, 1, 1), (32, 1, 1), 0, args, tensors=tensors)  # unseen
    with pytest.raises(
        SimtMisuseError, match=r"out-of-bounds global read of 4 bytes at byte offset 400 of tensor x"
    ) as err:
        _kernel("copy_past_end", True).launch((4, 1, 1), (32, 1, 1), 0, args, tensors=tensors)
    if shutil.which("addr2line"):
        assert f"(line {_line('y[i < n ? i : 0] = x[i]')})" in str(err.value)


def test_out_of_bounds_shared_write():
    out = np.zeros(64, np.float32)
    _kernel("shared_overrun", True).launch((1, 1, 1), (64, 1, 1), 256, [_ptr(out), ctypes.c_int32(0)])
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.float32))
    _kernel("shared_overrun", False).launch((1, 1, 1), (64, 1, 1), 256, [_ptr(out), ctypes.c_int32(4)])
    with pytest.raises(SimtMisuseError, match=r"out-of-bounds shared memory write of 4 bytes at offset 256"):
        _kernel("shared_overrun", True).launch((1, 1, 1), (64, 1, 1), 256, [_ptr(out), ctypes.c_int32(4)])


def test_read_of_another_threads_write_in_the_same_epoch_is_a_race():
    out = np.zeros(64, np.int32)
    _kernel("neighbour_swap", True).launch((1, 1, 1), (64, 1, 1), 256, [_ptr(out), ctypes.c_int32(1)])
    np.testing.assert_array_equal(out, np.arange(64) ^ 1)
    with pytest.raises(
        SimtRaceError, match=r"race on shared memory: thread \d+ reads offset \d+, which thread \d+"
    ):
        _kernel("neighbour_swap", True).launch((1, 1, 1), (64, 1, 1), 256, [_ptr(out), ctypes.c_int32(0)])
