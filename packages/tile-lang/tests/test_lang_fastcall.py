"""The per-signature fast call path: taken for exact arrays, never for ones the checks refuse."""

import numpy as np
import pytest
from _lang_kernels import row_scale

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang._src.fastcall import MISS
from tile.lang.errors import KernelArgumentError


def scale_kernel(M: int, N: int, dtype: str = "float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), f: T.float32, B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((M, N), dtype)
            T.copy(A, a)
            for i, j in T.Parallel(M, N):
                a[i, j] = a[i, j] * T.cast(f, dtype)
            T.copy(a, B)

    return main


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(scale_kernel(4, 8), out_idx=[-1], target="cpu")


def test_exact_numpy_arrays_take_the_fast_path(kernel):
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = kernel._fast.call(kernel._fn, (a, 2.0))
    assert out is not MISS
    np.testing.assert_array_equal(out, a * 2)
    np.testing.assert_array_equal(kernel(a, 3.0), a * 3)


def test_exact_torch_tensors_take_the_fast_path(kernel):
    torch = pytest.importorskip("torch")
    a = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    out = kernel._fast.call(kernel._fn, (a, 2.0))
    assert out is not MISS and isinstance(out, torch.Tensor)
    assert torch.equal(out, a * 2)
    assert isinstance(kernel(a, 1.0), torch.Tensor)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: np.zeros((4, 8), np.float64), "dtype float64"),
        (lambda: np.zeros((4, 9), np.float32), r"shape \[4, 9\]"),
        (lambda: np.zeros((8, 4), np.float32).T, "not contiguous"),
        (lambda: [[0.0] * 8] * 4, "must be a numpy array"),
    ],
)
def test_wrong_arguments_miss_and_raise_the_typed_error(kernel, make, message):
    value = make()
    assert kernel._fast.call(kernel._fn, (value, 1.0)) is MISS
    with pytest.raises(KernelArgumentError, match=message):
        kernel(value, 1.0)


def test_wrong_argument_count_raises(kernel):
    with pytest.raises(KernelArgumentError, match="expected 2 arguments"):
        kernel(np.zeros((4, 8), np.float32))


def test_unaligned_and_mixed_arguments_go_the_checked_way(kernel):
    raw = np.zeros(4 * 8 * 4 + 72, np.uint8)
    start = (-raw.ctypes.data) % 64 + 1
    odd = np.frombuffer(raw.data, np.float32, 32, offset=start).reshape(4, 8)
    odd[...] = 1.0
    assert not odd.flags.aligned
    assert kernel._fast.call(kernel._fn, (odd, 2.0)) is MISS
    np.testing.assert_array_equal(kernel(odd, 2.0), np.full((4, 8), 2.0, np.float32))
    torch = pytest.importorskip("torch")
    mixed = tilelang.compile(add_kernel(), target="cpu")
    a, b, c = np.ones((4, 8), np.float32), torch.ones(4, 8), torch.zeros(4, 8)
    assert mixed._fast.call(mixed._fn, (a, b, c)) is MISS
    mixed(a, b, c)
    assert torch.equal(c, torch.full((4, 8), 2.0))


def add_kernel():
    @T.prim_func
    def add(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32"), C: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((4, 8), "float32")
            b = T.alloc_fragment((4, 8), "float32")
            T.copy(A, a)
            T.copy(B, b)
            for i, j in T.Parallel(4, 8):
                a[i, j] = a[i, j] + b[i, j]
            T.copy(a, C)

    return add


def test_symbolic_shapes_and_bfloat16_use_the_checked_path():
    sym = tilelang.compile(row_scale(T.symbolic("M"), 8, 2.0), out_idx=[-1], target="cpu")
    assert not sym._fast.enabled
    a = np.ones((3, 8), np.float32)
    np.testing.assert_array_equal(sym(a), a * 2)
    bf16 = tilelang.compile(row_scale(4, 8, 2.0, "bfloat16"), out_idx=[-1], target="cpu")
    import ml_dtypes

    x = np.ones((4, 8), ml_dtypes.bfloat16)
    assert bf16._fast.call(bf16._fn, (x,)) is MISS
    np.testing.assert_array_equal(bf16(x).astype(np.float32), np.full((4, 8), 2.0, np.float32))
