"""8- and 16-bit integer arithmetic, printed so that C++ sees TIR's wrapped values.

TIR computes ``a + b`` of two ``uint16`` values in 16 bits (it wraps); TVM's C printer
writes ``(a + b)``, which C++ evaluates in ``int`` after promoting both operands. A store
truncates the result back, so sums, differences and products that only reach memory are
right; whatever *compares* or *widens* the promoted value sees the unwrapped one:
``min(x + (ushort)60000, (ushort)5000)`` is 5000 in C++ where TIR's answer is the wrapped
sum. On HIP the mixed ``int``/``unsigned short`` operands also leave ``tile::min`` with no
best overload (hipcc: "call to 'min' is ambiguous"; found by the program fuzzer).

``wrap_narrow_integers`` casts such an operand back to its own type where it meets a
consumer that depends on its high bits (max/min, the comparisons, division and remainder,
a cast to another type). TVM prints a cast to an expression's own type as nothing, so the
operand becomes ``Cast(narrow, Cast(int32, e))``: ``((ushort)((int)(e)))``.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

NARROW_INTEGERS = frozenset({"int8", "int16", "uint8", "uint16"})

_PRINTED_AS_ITS_TYPE = (tirx.Var, tirx.IntImm, tirx.Cast, ir.TensorLoad)
"""Expressions TVM prints with their own type: a variable, a constant (``(ushort)3``), a cast,
a load. Anything else of a narrow type (arithmetic above all) C++ promotes to ``int``."""

_BINARY_CONSUMERS = (
    tirx.Max, tirx.Min, tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE,
    tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod,
)  # fmt: skip


def _wrapped(operand: Any) -> Any:
    dtype = str(operand.ty)
    if dtype not in NARROW_INTEGERS or isinstance(operand, _PRINTED_AS_ITS_TYPE):
        return operand
    return tirx.Cast(dtype, tirx.Cast("int32", operand))


def _on_binary(node: Any) -> Any:
    a, b = _wrapped(node.a), _wrapped(node.b)
    if a.same_as(node.a) and b.same_as(node.b):
        return node
    return type(node)(a, b)


def _on_cast(node: Any) -> Any:
    value = node.value
    if str(value.ty) == str(node.ty):
        return node
    wrapped = _wrapped(value)
    return node if wrapped.same_as(value) else tirx.Cast(str(node.ty), wrapped)


def wrap_narrow_integers(mod: Any) -> Any:
    """``mod`` with each promoted 8/16-bit integer operand of a high-bit consumer wrapped
    back to its type (see the module docstring); other expressions are untouched."""
    rules = [(kind, _on_binary) for kind in _BINARY_CONSUMERS] + [(tirx.Cast, _on_cast)]
    out = {}
    for gv, func in mod.functions.items():
        out[gv] = tvm_ffi.structural_map(func, rules) if isinstance(func, tirx.PrimFunc) else func
    return tvm.IRModule(out, attrs=mod.attrs)
