"""`a_ptr: T.ptr` raw-pointer parameters (TileLang's test_tilelang_language_ptr form): the kernel
makes tensors over them with T.make_tensor; the call passes tensors or integer addresses."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang import KernelArgumentError


@T.prim_func
def axpy_by_pointer(x_ptr: T.ptr, y_ptr: T.ptr, out_ptr: T.ptr(), n: T.int32):
    X = T.make_tensor(x_ptr, (n,), "float32")
    Y = T.make_tensor(y_ptr, (n,), "float32")
    Out = T.make_tensor(out_ptr, (n,), "float32")
    with T.Kernel(1, threads=32):
        for i in T.Parallel(n):
            Out[i] = X[i] * 3.0 + Y[i]


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(axpy_by_pointer, target="cpu")


def test_numpy_arrays_and_addresses_reach_the_pointers(kernel):
    x = np.linspace(0, 1, 24, dtype=np.float32)
    y = np.arange(24, dtype=np.float32)
    out = np.zeros(24, np.float32)
    kernel(x, y, out, 24)
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)
    out[:] = 0
    kernel(x.ctypes.data, y.ctypes.data, out.ctypes.data, 10)  # addresses; only n elements
    np.testing.assert_allclose(out[:10], 3 * x[:10] + y[:10], rtol=1e-6)
    assert not out[10:].any()


def test_torch_tensors_and_data_ptr_reach_the_pointers(kernel):
    torch = pytest.importorskip("torch")
    x, y = torch.rand(16), torch.rand(16)
    out = torch.zeros(16)
    kernel(x.data_ptr(), y, out.data_ptr(), 16)
    torch.testing.assert_close(out, 3 * x + y)


def test_a_value_that_is_no_address_is_a_typed_error_at_the_kernel(kernel):
    with pytest.raises(KernelArgumentError, match="y_ptr is a pointer") as info:
        kernel(np.zeros(4, np.float32), "y", np.zeros(4, np.float32), 4)
    assert info.value.location is not None
    assert "data_ptr" in info.value.hint


def test_a_pointer_element_type_outside_a_table_is_refused_at_its_line():
    # T.Tensor([G], T.ptr) is a table of int64 addresses (test_lang_compat_language3.py);
    # T.ptr elsewhere is no element type
    from tile.lang.errors import TileTypeError

    with pytest.raises(TileTypeError, match="element type only of a tensor parameter") as info:

        @T.prim_func
        def gather(out: T.Tensor([2, 8], "float16")):
            with T.Kernel(2, threads=1):
                table = T.alloc_shared((2,), T.ptr)
                out[0, 0] = table[0]

    assert info.value.location is not None
    assert "T.alloc_shared" in info.value.location.source_line
