"""Evaluate integer tvm expressions over numpy arrays.

Layout checks (bijectivity, equality, inverse verification, enumeration) need the value
of an expression at every point of a small constant domain. Substituting constants
and simplifying point by point costs one C++ round trip per point; walking the
expression once with numpy arrays evaluates the whole domain at C speed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _tvm
from ._tvm import PrimExpr, Var

IntArray = npt.NDArray[np.int64]

_T = _tvm.expr_types()


def _floordiv(a: IntArray, b: IntArray) -> IntArray:
    return np.floor_divide(a, b)


def _truncdiv(a: IntArray, b: IntArray) -> IntArray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


def _truncmod(a: IntArray, b: IntArray) -> IntArray:
    return a - _truncdiv(a, b) * b


_BINARY: dict[type, Callable[[IntArray, IntArray], IntArray]] = {
    _T["Add"]: np.add,
    _T["Sub"]: np.subtract,
    _T["Mul"]: np.multiply,
    _T["FloorDiv"]: _floordiv,
    _T["FloorMod"]: np.mod,
    _T["Div"]: _truncdiv,
    _T["Mod"]: _truncmod,
    _T["Min"]: np.minimum,
    _T["Max"]: np.maximum,
    _T["BitwiseXor"]: np.bitwise_xor,
    _T["BitwiseAnd"]: np.bitwise_and,
    _T["BitwiseOr"]: np.bitwise_or,
    _T["LShift"]: np.left_shift,
    _T["RShift"]: np.right_shift,
    _T["EQ"]: np.equal,
    _T["NE"]: np.not_equal,
    _T["LT"]: np.less,
    _T["LE"]: np.less_equal,
    _T["GT"]: np.greater,
    _T["GE"]: np.greater_equal,
    _T["And"]: np.logical_and,
    _T["Or"]: np.logical_or,
}


class UnsupportedExpr(Exception):
    """The expression holds a node the evaluator does not know (a call, a float...)."""


def evaluate(
    exprs: Sequence[PrimExpr], env: Mapping[Var, IntArray | int], shape: tuple[int, ...] = ()
) -> list[IntArray]:
    """Evaluate ``exprs`` with ``env`` giving each free variable's value(s).

    Every result is broadcast to ``shape`` (the common shape of the env arrays) and
    has dtype int64 (booleans become 0/1).

    Raises:
        UnsupportedExpr: a node other than integer arithmetic, bitwise, comparison,
            logic, ``Select`` or ``Cast``; or a variable missing from ``env``.
    """
    memo: dict[Any, Any] = {}

    def ev(e: PrimExpr) -> Any:
        if isinstance(e, int):
            return np.int64(e)
        hit = memo.get(e)
        if hit is not None:
            return hit
        kind = type(e)
        out: Any
        if kind is _T["IntImm"]:
            out = np.int64(e.value)
        elif kind is _T["Var"]:
            if e not in env:
                raise UnsupportedExpr(f"free variable {e} has no value")
            out = np.asarray(env[e], dtype=np.int64)
        elif kind in _BINARY:
            out = _BINARY[kind](ev(e.a), ev(e.b))
        elif kind is _T["Select"]:
            out = np.where(ev(e.condition), ev(e.true_value), ev(e.false_value))
        elif kind is _T["Not"]:
            out = np.logical_not(ev(e.a))
        elif kind is _T["BitwiseNot"]:
            out = np.invert(ev(e.a))
        elif kind is _T["Cast"]:
            out = ev(e.value)
        else:
            raise UnsupportedExpr(f"cannot evaluate {kind.__name__}: {e}")
        memo[e] = out
        return out

    results = []
    for e in exprs:
        value = np.asarray(ev(e)).astype(np.int64)
        results.append(np.broadcast_to(value, shape) if shape else value)
    return results


def grid(extents: Sequence[int]) -> list[IntArray]:
    """Row-major coordinate arrays (flattened) of the box ``[0, e0) x [0, e1) x ...``."""
    if not extents:
        return []
    mesh = np.meshgrid(*[np.arange(e, dtype=np.int64) for e in extents], indexing="ij")
    return [m.reshape(-1) for m in mesh]


evaluate_over = evaluate
"""``evaluate`` under the name ``tile.layout`` exports (the other packages' checks use it)."""

box_grid = grid
"""``grid`` under the name ``tile.layout`` exports."""
