"""An integer expression of the thread index, evaluated for every thread of a block.

Shared by the passes that ask which threads a condition keeps (``T.ws(g)``, ``if tx < 128``)
and by the barrier plan, which asks which elements the kept threads reach.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]


def thread_values(expr: Any, thread_var: Any, threads: int, analyzer: Any) -> list[int] | None:
    """The value of ``expr`` (an integer expression of ``thread_var`` alone) at each thread
    ``0 .. threads - 1`` of the block; None when it depends on anything else."""
    others = [False]

    def visit(v: Any) -> None:
        others[0] = others[0] or not v.same_as(thread_var)

    tvm_ffi.structural_walk(expr, (ir.Var, visit))
    if others[0]:
        return None
    direct = grid_values(expr, [(thread_var, 0, threads)])
    if direct is not None:
        return [int(v) for v in direct]
    dtype = str(thread_var.ty)
    values: list[int] = []
    for t in range(threads):  # nodes grid_values does not evaluate: TVM's simplifier, thread by thread
        value = analyzer.simplify(tvm_ffi.structural_map(expr, (ir.Var, lambda v, t=t: tirx.const(t, dtype))))
        if not isinstance(value, tirx.IntImm):
            return None
        values.append(int(value.value))
    return values


def _c_div(a: Any, b: Any) -> Any:
    """C's truncating division, element-wise."""
    quotient = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b > 0), quotient, -quotient)


_NUMPY_BINARY: dict[type, Any] = {
    ir.prim.expr.Add: lambda a, b: a + b,
    ir.prim.expr.Sub: lambda a, b: a - b,
    ir.prim.expr.Mul: lambda a, b: a * b,
    ir.prim.expr.FloorDiv: lambda a, b: a // b,
    ir.prim.expr.FloorMod: lambda a, b: a % b,
    ir.prim.expr.Div: _c_div,
    ir.prim.expr.Mod: lambda a, b: a - b * _c_div(a, b),
    ir.prim.expr.Min: lambda a, b: np.minimum(a, b),
    ir.prim.expr.Max: lambda a, b: np.maximum(a, b),
    ir.prim.expr.BitwiseAnd: lambda a, b: a & b,
    ir.prim.expr.BitwiseOr: lambda a, b: a | b,
    ir.prim.expr.BitwiseXor: lambda a, b: a ^ b,
    ir.prim.expr.LShift: lambda a, b: a << b,
    ir.prim.expr.RShift: lambda a, b: a >> b,
    ir.prim.expr.EQ: lambda a, b: (a == b).astype(np.int64),
    ir.prim.expr.NE: lambda a, b: (a != b).astype(np.int64),
    ir.prim.expr.LT: lambda a, b: (a < b).astype(np.int64),
    ir.prim.expr.LE: lambda a, b: (a <= b).astype(np.int64),
    ir.prim.expr.GT: lambda a, b: (a > b).astype(np.int64),
    ir.prim.expr.GE: lambda a, b: (a >= b).astype(np.int64),
    ir.prim.expr.And: lambda a, b: ((a != 0) & (b != 0)).astype(np.int64),
    ir.prim.expr.Or: lambda a, b: ((a != 0) | (b != 0)).astype(np.int64),
}
"""The integer nodes :func:`grid_values` evaluates, element-wise over numpy arrays (C's
truncating ``Div``/``Mod``, Python's flooring ``FloorDiv``/``FloorMod``)."""


def grid_values(expr: Any, axes: list[tuple[Any, int, int]]) -> Any:
    """``expr`` evaluated at every point of the grid ``axes`` (``(var, first, count)`` each,
    one numpy dimension per axis, in order), as an int64 array of the grid's shape; None when
    ``expr`` reads anything else or holds a node this does not evaluate.

    >>> from tvm import tirx
    >>> t, i = tirx.Var("t", "int32"), tirx.Var("i", "int32")
    >>> grid_values(t * 4 + i, [(t, 0, 2), (i, 0, 3)]).tolist()
    [[0, 1, 2], [4, 5, 6]]
    """
    shape = [count for _, _, count in axes]
    grids = np.meshgrid(*(np.arange(first, first + count, dtype=np.int64) for _, first, count in axes),
                        indexing="ij")  # fmt: skip
    env = [(var, grid) for (var, _, _), grid in zip(axes, grids, strict=True)]

    def value(node: Any) -> Any:
        if isinstance(node, tirx.IntImm):
            return np.int64(node.value)
        if isinstance(node, ir.Var):
            return next((grid for var, grid in env if node.same_as(var)), None)
        if isinstance(node, ir.prim.expr.Cast) and str(node.ty).startswith(("int", "uint")):
            return value(node.value)
        binary = _NUMPY_BINARY.get(type(node))
        if binary is not None:
            a, b = value(node.a), value(node.b)
            if a is None or b is None:
                return None
            if type(node) in (
                ir.prim.expr.FloorDiv,
                ir.prim.expr.FloorMod,
                ir.prim.expr.Div,
                ir.prim.expr.Mod,
            ) and np.any(b == 0):
                return None
            if type(node) in (ir.prim.expr.LShift, ir.prim.expr.RShift) and np.any(b < 0):
                return None
            return binary(a, b)
        if isinstance(node, ir.prim.expr.Not):
            a = value(node.a)
            return None if a is None else (a == 0).astype(np.int64)
        if isinstance(node, ir.prim.expr.BitwiseNot):
            a = value(node.a)
            return None if a is None else ~a
        if isinstance(node, ir.prim.expr.Select):
            taken, yes, no = value(node.condition), value(node.true_value), value(node.false_value)
            if taken is None or yes is None or no is None:
                return None
            return np.where(taken != 0, yes, no)
        return None

    with np.errstate(all="ignore"):
        result = value(expr)
    return None if result is None else np.broadcast_to(result, shape).astype(np.int64)


__all__ = ["grid_values", "thread_values"]
