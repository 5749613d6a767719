"""``@T.prim_func`` written in the eager style (TileLang's "lazy" prim_func,
testing/python/language/test_tilelang_language_func_attrs.py): parameters without annotations,
declared in the body (``A: T.Tensor[[128, 128], T.float32]``), outputs made with ``T.empty`` and
returned. The decorator gives a ``PrimFunc`` whose returned outputs follow the inputs and whose
``tilelang_out_idx`` attr lists them; ``tile.lang.compile`` takes that as ``out_idx``, and
refuses an ``out_idx=`` beside it, as TileLang does. ``T.annotate_pass_configs`` and
``T.annotate_compile_flags`` record TileLang's attr names.

Reference: numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import ArgumentValueError


def _plus_one():
    @T.prim_func
    def kernel(A):
        A: T.Tensor[[64, 32], T.float32]
        B = T.empty([64, 32], T.float32)
        with T.Kernel(1):
            for i in T.serial(64):
                for j in T.serial(32):
                    B[i, j] = A[i, j] + 1.0
        return B

    return kernel


def test_the_returned_output_is_an_attr_and_compile_takes_it() -> None:
    kernel = _plus_one()
    assert list(kernel.attrs["tilelang_out_idx"]) == [-1]
    assert [str(p.name) for p in kernel.params] == ["A", "B"]
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(tilelang.compile(kernel, target="cpu")(a)), a + 1.0)


def test_out_idx_beside_returned_outputs_is_a_conflict() -> None:
    with pytest.raises(ArgumentValueError, match="Out index conflict"):
        tilelang.compile(_plus_one(), out_idx=[-1], target="cpu")


def test_two_returned_outputs_and_annotations() -> None:
    @T.prim_func
    def kernel(A):
        A: T.Tensor[[16], T.float32]
        T.annotate_pass_configs({tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
        B = T.empty([16], T.float32)
        C = T.empty([17], T.float32)
        with T.Kernel(1):
            for i in T.serial(16):
                B[i] = A[i] * 2.0
            for i in T.serial(17):
                C[i] = T.cast(i, "float32")
        return B, C

    assert list(kernel.attrs["tilelang_out_idx"]) == [-2, -1]
    assert "tilelang_pass_configs" in kernel.attrs  # TileLang's attr name
    a = np.arange(16, dtype=np.float32)
    b, c = tilelang.compile(kernel, target="cpu")(a)
    np.testing.assert_array_equal(np.asarray(b), a * 2.0)
    np.testing.assert_array_equal(np.asarray(c), np.arange(17, dtype=np.float32))


def test_annotated_parameters_keep_the_plain_parse() -> None:
    @T.prim_func
    def kernel(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        T.annotate_compile_flags(["-lineinfo"])
        with T.Kernel(1):
            for i in T.serial(8):
                B[i] = A[i]

    assert "tilelang_compile_flags" in kernel.attrs and "tilelang_out_idx" not in kernel.attrs
