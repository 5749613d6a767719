"""Outputs of a call with no array argument are torch tensors where torch is installed, as
TileLang returns them (its infinity test compares `kernel()` with `torch.all`); numpy inputs
still give numpy outputs and torch inputs torch outputs."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T

torch = pytest.importorskip("torch")


@tilelang.jit(out_idx=-1, target="cpu")
def iota(n: int, scale: int):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                A[i] = T.Cast("float32", i * scale)

    return main


@tilelang.jit(out_idx=-1, target="cpu")
def shifted(n: int):
    @T.prim_func
    def main(x: T.float32, A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                A[i] = x + T.Cast("float32", i)

    return main


@tilelang.jit(out_idx=-1, target="cpu")
def plus_one(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                A[i] = X[i] + 1.0

    return main


def test_a_kernel_with_no_inputs_returns_torch_tensors():
    out = iota(16, 3)()
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert torch.equal(out, torch.arange(16, dtype=torch.float32) * 3)


def test_scalar_arguments_alone_give_torch_tensors_too():
    out = shifted(8)(2.5)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.float32) + 2.5)


def test_array_inputs_still_choose_the_output_kind():
    x = np.arange(8, dtype=np.float32)
    out = plus_one(8)(x)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, x + 1)
    assert isinstance(plus_one(8)(torch.from_numpy(x)), torch.Tensor)


def test_an_eager_kernel_with_no_tensor_arguments_returns_torch_tensors():
    @tilelang.jit
    def squares(n: int):
        B = T.empty((n,), "int32")
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                B[i] = i * i
        return B

    out = squares(6)
    assert isinstance(out, torch.Tensor)
    assert out.tolist() == [0, 1, 4, 9, 16, 25]


def test_without_torch_the_outputs_are_numpy(monkeypatch):
    from tile.lang._src import jit

    monkeypatch.setattr(jit, "torch_installed", lambda: False)
    out = iota(4, 2)()
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, [0, 2, 4, 6])
