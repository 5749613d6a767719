"""An integer expression of the thread index, evaluated for every thread of a block.

Shared by the passes that ask which threads a condition keeps (``T.ws(g)``, ``if tx < 128``)
and by the barrier plan, which asks which elements the kept threads reach.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]


def _c_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


_BINARY: dict[type, Any] = {
    ir.prim.expr.Add: lambda a, b: a + b,
    ir.prim.expr.Sub: lambda a, b: a - b,
    ir.prim.expr.Mul: lambda a, b: a * b,
    ir.prim.expr.FloorDiv: lambda a, b: a // b,
    ir.prim.expr.FloorMod: lambda a, b: a % b,
    ir.prim.expr.Div: _c_div,
    ir.prim.expr.Mod: lambda a, b: a - b * _c_div(a, b),
    ir.prim.expr.Min: min,
    ir.prim.expr.Max: max,
    ir.prim.expr.BitwiseAnd: lambda a, b: a & b,
    ir.prim.expr.BitwiseOr: lambda a, b: a | b,
    ir.prim.expr.BitwiseXor: lambda a, b: a ^ b,
    ir.prim.expr.LShift: lambda a, b: a << b,
    ir.prim.expr.RShift: lambda a, b: a >> b,
    ir.prim.expr.EQ: lambda a, b: int(a == b),
    ir.prim.expr.NE: lambda a, b: int(a != b),
    ir.prim.expr.LT: lambda a, b: int(a < b),
    ir.prim.expr.LE: lambda a, b: int(a <= b),
    ir.prim.expr.GT: lambda a, b: int(a > b),
    ir.prim.expr.GE: lambda a, b: int(a >= b),
    ir.prim.expr.And: lambda a, b: int(bool(a) and bool(b)),
    ir.prim.expr.Or: lambda a, b: int(bool(a) or bool(b)),
}
"""Integer expression nodes :func:`thread_values` evaluates, by node type (C's truncating
``Div``/``Mod``, Python's flooring ``FloorDiv``/``FloorMod``)."""


def _evaluate(expr: Any, var: Any, value: int) -> int | None:
    """``expr`` with ``var`` = ``value``, for an integer expression of ``var`` alone (None: not one)."""
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, ir.Var):
        return value if expr.same_as(var) else None
    binary = _BINARY.get(type(expr))
    if binary is not None:
        a, b = _evaluate(expr.a, var, value), _evaluate(expr.b, var, value)
        if a is None or b is None:
            return None
        try:
            return int(binary(a, b))
        except (ZeroDivisionError, ValueError):  # x / 0, a negative shift
            return None
    if isinstance(expr, ir.prim.expr.Not):
        a = _evaluate(expr.a, var, value)
        return None if a is None else int(not a)
    if isinstance(expr, ir.prim.expr.BitwiseNot):
        a = _evaluate(expr.a, var, value)
        return None if a is None else ~a
    if isinstance(expr, ir.prim.expr.Select):
        taken = _evaluate(expr.condition, var, value)
        if taken is None:
            return None
        return _evaluate(expr.true_value if taken else expr.false_value, var, value)
    return None


def thread_values(expr: Any, thread_var: Any, threads: int, analyzer: Any) -> list[int] | None:
    """The value of ``expr`` (an integer expression of ``thread_var`` alone) at each thread
    ``0 .. threads - 1`` of the block; None when it depends on anything else."""
    others = [False]

    def visit(v: Any) -> None:
        others[0] = others[0] or not v.same_as(thread_var)

    tvm_ffi.structural_walk(expr, (ir.Var, visit))
    if others[0]:
        return None
    dtype = str(thread_var.ty)
    values: list[int] = []
    for t in range(threads):
        direct = _evaluate(expr, thread_var, t)
        if direct is not None:
            values.append(direct)
            continue
        value = analyzer.simplify(tvm_ffi.structural_map(expr, (ir.Var, lambda v, t=t: tirx.const(t, dtype))))
        if not isinstance(value, tirx.IntImm):
            return None
        values.append(int(value.value))
    return values


__all__ = ["thread_values"]
