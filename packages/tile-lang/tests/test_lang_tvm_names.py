"""``tvm.tirx.PrimExpr`` / ``tvm.tirx.Call``: the names TileLang's dequantization helpers
annotate with, bound by importing ``tile.lang`` to apache-tvm's classes that play the part."""

from __future__ import annotations

import numpy as np
from tvm import ir, tirx

import tile.lang as tilelang
import tile.lang.language as T


def test_names_exist_and_classify_expressions():
    assert tirx.PrimExpr is ir.Expr and tirx.Call is ir.Call
    x = tirx.Var("x", "int32")
    assert isinstance(x + 1, tirx.PrimExpr)
    assert isinstance(tirx.const(3, "uint8"), tirx.PrimExpr)
    assert isinstance(tirx.call_intrin("float32", "tirx.exp", tirx.const(1.0, "float32")), tirx.Call)
    assert not isinstance(3, tirx.PrimExpr)


def _low_nibble(val: tirx.PrimExpr, dtype: str) -> tirx.PrimExpr:
    """A helper typed as TileLang programs type theirs: the low 4 bits of ``val`` as ``dtype``."""
    return tirx.Cast(dtype, val & tirx.const(15, str(val.ty)))


def test_a_helper_annotated_with_prim_expr_builds_kernel_code():
    @T.prim_func
    def unpack(A: T.Tensor((8,), "uint8"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = _low_nibble(A[i], "float32")

    kernel = tilelang.compile(unpack, target="cpu")
    a = np.array([0x00, 0x1F, 0x2A, 0xFF, 0x07, 0x80, 0x3C, 0x91], np.uint8)
    b = np.zeros(8, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, (a & 15).astype(np.float32))


def test_dtype_takes_c_type_names():
    # TileLang's dequantization helpers check T.dtype(source_format) in [T.int, T.uint]
    pairs = {"int": "int32", "uint": "uint32", "float": "float32", "double": "float64", "long": "int64",
             "short": "int16", "ulong": "uint64"}  # fmt: skip
    for c_name, name in pairs.items():
        assert T.dtype(c_name) == name and T.dtype(c_name).bits == int(name.lstrip("uintfloa"))
    assert T.dtype("uint") in [T.int, T.uint] and T.dtype("int") == T.int
    assert T.dtype("float16") == "float16"


def test_expressions_have_a_dtype_name():
    x = tirx.Var("x", "int32")
    assert (x + 1).dtype == "int32"
    assert tirx.const(3, "uint8").dtype == "uint8"
    assert tirx.Cast("float16", x).dtype == "float16"
