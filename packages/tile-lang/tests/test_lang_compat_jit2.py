"""The JIT surface TileLang's testing/python jit and kernel tests call, each checked against
numpy or a hand-computed result: ``JITKernel(func, out_idx=..., target=...)`` and
``tilelang.transform.simplify.apply_simplify``."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TileError
from tile.lang import JITKernel
from tile.lang.transform.simplify import apply_simplify


def _affine(n: int):
    @T.prim_func
    def affine(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(n):
                B[i] = A[i] * 2.0 + 1.0

    return affine


def test_jitkernel_constructor_compiles_like_compile():
    a = np.arange(8, dtype=np.float32)
    by_keyword = JITKernel(_affine(8), out_idx=[-1], target="cpu")
    by_position = JITKernel(_affine(8), [1], target="cpu")  # TileLang's second parameter: out_idx
    assert isinstance(by_keyword, JITKernel)
    np.testing.assert_array_equal(by_keyword(a), 2 * a + 1)
    np.testing.assert_array_equal(by_position(a), 2 * a + 1)
    b = np.zeros(8, dtype=np.float32)
    JITKernel(_affine(8), target="cpu")(a, b)  # no out_idx: the output is passed
    np.testing.assert_array_equal(b, [1, 3, 5, 7, 9, 11, 13, 15])


def test_jitkernel_constructor_needs_a_kernel():
    with pytest.raises(TileError, match="needs the kernel"):
        JITKernel()
    with pytest.raises(TileError, match=r"@T\.prim_func"):
        JITKernel(lambda x: x, target="cpu")


def test_apply_simplify_gives_a_kernel_that_computes_the_same():
    kernel = _affine(16)
    simplified = apply_simplify(kernel)
    a = np.linspace(-1, 1, 16, dtype=np.float32)
    out = tilelang.compile(simplified, out_idx=[-1], target="cpu")(a)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=0, atol=1e-6)
    assert tilelang.transform.simplify.simplify_prim_func is tilelang.transform.simplify_prim_func
