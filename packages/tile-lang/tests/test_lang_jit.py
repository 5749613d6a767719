"""compile/jit/JITKernel: argument handling, outputs, torch interop, targets."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TargetError
from tile.lang import KernelArgumentError


@T.prim_func
def double(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(32):
            B[bx * 32 + i] = A[bx * 32 + i] * 2.0


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(double, out_idx=[-1], target="cpu")


def test_outputs_are_allocated_and_returned(kernel):
    a = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(kernel(a), 2 * a)


def test_without_out_idx_outputs_are_written_in_place():
    k = tilelang.compile(double, target="cpu")
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    assert k(a, b) is None
    np.testing.assert_array_equal(b, 2 * a)


def test_unaligned_inputs_are_staged(kernel):
    raw = np.arange(65, dtype="float32")
    a = raw[1:]  # 4-byte offset from an aligned start
    np.testing.assert_array_equal(kernel(a), 2 * a)


def test_torch_in_torch_out(kernel):
    torch = pytest.importorskip("torch")
    x = torch.arange(64, dtype=torch.float32)
    y = kernel(x)
    assert isinstance(y, torch.Tensor)
    assert torch.equal(y, 2 * x)


@pytest.mark.parametrize(
    "args,needle",
    [
        ((np.zeros(64, "float64"),), "dtype float64, expected float32"),
        ((np.zeros(63, "float32"),), "shape [63], expected [64]"),
        ((np.zeros(128, "float32")[::2],), "not contiguous"),
        ((), "expected 1 arguments"),
        (([1.0] * 64,), "numpy array or torch tensor"),
    ],
)
def test_bad_arguments_raise_typed_errors_at_the_kernel(kernel, args, needle):
    with pytest.raises(KernelArgumentError) as info:
        kernel(*args)
    assert needle in info.value.message
    assert info.value.location is not None and info.value.location.filename == __file__


def test_jit_factory_compiles_once_per_argument_set():
    built = []

    @tilelang.jit(out_idx=[-1], target="cpu")
    def fill_with(n, value):
        built.append(n)

        @T.prim_func
        def f(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                T.fill(A, value)

        return f

    assert fill_with(10, 3.0)()[9] == 3.0
    assert fill_with(10, 3.0)()[0] == 3.0
    assert fill_with(12, 1.0)().shape == (12,)
    assert built == [10, 12]


def test_default_target_env_overrides_auto(monkeypatch):
    monkeypatch.setenv("TILE_DEFAULT_TARGET", "metal")
    with pytest.raises(TargetError):
        tilelang.compile(double, out_idx=[-1])
    monkeypatch.setenv("TILE_DEFAULT_TARGET", '{"kind": "cpu"}')
    assert tilelang.compile(double, out_idx=[-1]).target.kind == "cpu"


def test_kernel_source_has_lowered_tir_and_llvm(kernel):
    assert "T.parallel" in kernel.get_kernel_source()
    assert "define" in kernel.get_kernel_source("llvm")
