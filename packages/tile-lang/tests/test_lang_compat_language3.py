"""Forms TileLang's testing/python/language files use (third batch): Python ints beside
integer expressions take the expression's type (intimm). Results are checked against numpy
or hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import ArgumentValueError


@T.prim_func
def _masks(A: T.Tensor((4,), "int64"), B: T.Tensor((4,), "uint32"), C: T.Tensor((4,), "int64"),
           D: T.Tensor((4,), "uint32")):  # fmt: skip
    with T.Kernel(1, threads=1):
        for i in T.serial(4):
            C[i] = (A[i] & 0xFFFFFFFF) | (0x7FFFFFFFFFFFFFFF & (A[i] ^ 0x10000000000))
            D[i] = (B[i] & 0xFFFFFFFF) ^ 0x80000001


def test_an_int_mask_takes_the_type_of_the_other_operand():
    # apache-tvm alone makes each int an int32 first: `A & 0xFFFFFFFF` of an int64 became
    # `A & -1` (all 64 bits kept), and the uint32 mask failed to convert.
    a = np.array([2**40 + 5, -1, 2**33 + 2**31, 7], np.int64)
    b = np.array([0, 1, 0xFFFFFFFF, 0x80000000], np.uint32)
    c, d = np.zeros(4, np.int64), np.zeros(4, np.uint32)
    tilelang.compile(_masks, target="cpu")(a, b, c, d)
    np.testing.assert_array_equal(c, (a & 0xFFFFFFFF) | (0x7FFFFFFFFFFFFFFF & (a ^ 0x10000000000)))
    np.testing.assert_array_equal(d, [0x80000001, 0x80000000, 0x7FFFFFFE, 1])


def test_constants_and_masks_outside_a_kernel():
    assert T.uint64(2**64 - 1).value == 2**64 - 1 and str(T.uint64(2**64 - 1).ty) == "uint64"
    assert T.int64(-(2**63)).value == -(2**63) and T.uint32(0xFFFFFFFF).value == 0xFFFFFFFF
    masked = T.uint32() & 0xFFFFFFFF
    assert str(masked.ty) == "uint32" and masked.b.value == 0xFFFFFFFF
    assert (T.int32() & 0xFFFFFFFF).b.value == -1  # the same 32 bits, as in C
    with pytest.raises(ArgumentValueError, match="does not fit uint32"):
        T.uint32(2**32)
    with pytest.raises(ArgumentValueError, match="more than the 32 bits"):
        T.int32() & 2**40
