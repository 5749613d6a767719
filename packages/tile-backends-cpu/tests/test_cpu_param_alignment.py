"""Kernel parameters promise element alignment only, so numpy's 16-byte data goes in as is."""

import re

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu import MANIFEST
from tile.ir.target import Target
from tile.lang._src.arguments import stage_aligned


def add_kernel(M: int, N: int, dtype: str = "float32"):
    @T.prim_func
    def add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 8), threads=128) as (bx, by):
            a = T.alloc_fragment((8, 64), dtype)
            b = T.alloc_fragment((8, 64), dtype)
            T.copy(A[by * 8, bx * 64], a)
            T.copy(B[by * 8, bx * 64], b)
            for i, j in T.Parallel(8, 64):
                a[i, j] = a[i, j] + b[i, j]
            T.copy(a, C[by * 8, bx * 64])

    return add


def at_offset(array: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``array`` whose data starts ``offset`` bytes past a 64-byte boundary."""
    raw = np.empty(array.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    out = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def test_cpu_capabilities_promise_element_alignment():
    assert MANIFEST.capabilities(Target("cpu")).param_alignment == 1


def test_llvm_ir_assumes_no_more_than_element_alignment():
    kernel = tilelang.compile(add_kernel(16, 128), target="cpu")
    llvm = kernel.get_kernel_source("llvm")
    assumed = {int(a) for a in re.findall(r'"align"\(ptr %\w+, i64 (\d+)\)', llvm)}
    assert assumed and max(assumed) <= 4, assumed
    assert "align=4" in kernel.get_kernel_source("tir")


@pytest.mark.parametrize("offset", [4, 16, 36])
def test_element_aligned_arrays_compute_in_place(offset: int):
    M, N = 19, 200  # tails in both dims
    kernel = tilelang.compile(add_kernel(M, N), target="cpu")
    rng = np.random.default_rng(offset)
    a = at_offset(rng.random((M, N), dtype=np.float32), offset)
    b = at_offset(rng.random((M, N), dtype=np.float32), offset)
    c = at_offset(np.zeros((M, N), np.float32), offset)
    staged, back = stage_aligned(c, kernel.param_alignment)
    assert staged is c and back is None  # passed without a copy
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_misaligned_array_is_staged_and_copied_back():
    M, N = 8, 64
    kernel = tilelang.compile(add_kernel(M, N), target="cpu")
    raw = np.zeros(M * N * 4 + 72, np.uint8)
    start = (-raw.ctypes.data) % 64 + 1  # one byte past an element boundary
    c = np.frombuffer(raw.data, np.float32, M * N, offset=start).reshape(M, N)
    assert not c.flags.aligned
    a = np.ones((M, N), np.float32)
    b = np.full((M, N), 2, np.float32)
    staged, back = stage_aligned(c, kernel.param_alignment)
    assert back is not None and staged.ctypes.data % 4 == 0
    kernel(a, b, c)
    np.testing.assert_array_equal(c, np.full((M, N), 3, np.float32))


def test_torch_view_at_odd_element_is_passed_in_place():
    torch = pytest.importorskip("torch")
    M, N = 8, 64
    kernel = tilelang.compile(add_kernel(M, N), target="cpu")
    base = torch.zeros(M * N + 1)
    c = base[1:].view(M, N)  # 4 bytes past the allocator's alignment
    assert c.data_ptr() % 64 == 4
    a, b = torch.ones(M, N), torch.full((M, N), 2.0)
    staged, back = stage_aligned(c, kernel.param_alignment)
    assert staged is c and back is None
    kernel(a, b, c)
    assert torch.equal(c, torch.full((M, N), 3.0))
    assert float(base[0]) == 0.0  # nothing written before the view
