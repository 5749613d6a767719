"""Python ints beside integer expressions take the expression's type, as in TileLang.

apache-tvm 0.27 turns the Python int of ``x & 0xFFFFFFFF`` into an int32 constant before the
operator sees ``x``: the mask wraps to ``-1`` (an int64 ``x`` then keeps all its bits, a silent
wrong result), and for a uint32 ``x`` the conversion fails ("cannot make uint from negative
value"). ``T.uint64(2**64 - 1)`` fails too (the value does not fit TVM's int64 argument).
TileLang's TVM converts such an int by the other operand's type; importing ``tile.lang`` makes
the bitwise operators (``&``, ``|``, ``^``) of expressions do the same, and ``T.uint64(...)``
and the other element-type constructors take every value of their type.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import tirx  # type: ignore[import-untyped]
from tvm.ir.expr import ExprOperand  # type: ignore[import-untyped]

from ..errors import ArgumentValueError

_BITWISE = ("__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__")
_SYMBOL = {"and": "&", "or": "|", "xor": "^"}
_CONVERTED = "_tile_int_operand"


def integer_range(dtype: str) -> tuple[int, int] | None:
    """The smallest and largest value of a scalar integer type (None for other types)."""
    kind = tvm.DataType(dtype)
    if kind.lanes != 1 or dtype == "bool" or not dtype.startswith(("int", "uint")):
        return None
    bits = int(kind.bits)
    return (0, 2**bits - 1) if dtype.startswith("uint") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def int_constant(value: int, dtype: str, what: str) -> Any:
    """``value`` as a constant of integer type ``dtype``, or an ``ArgumentValueError`` naming
    ``what`` (the user's call) when the type cannot hold it."""
    low, high = integer_range(dtype) or (value, value)
    if not low <= value <= high:
        raise ArgumentValueError(
            f"{what}: {value} does not fit {dtype} ({low} .. {high})",
            hint="use a wider type (T.int64, T.uint64) or a value in that range",
        )
    return tirx.const(value, dtype)


def _mask_constant(value: int, dtype: str, symbol: str) -> Any:
    """A bit mask for an operand of ``dtype``: any value that has the type's width, read as
    the type's bits (``int32_x & 0xFFFFFFFF`` is ``int32_x & -1``, as in C)."""
    bits = int(tvm.DataType(dtype).bits)
    if not -(2 ** (bits - 1)) <= value < 2**bits:
        raise ArgumentValueError(
            f"x {symbol} {value:#x}: the constant has more than the {bits} bits of x ({dtype})",
            hint=f"cast x to a wider type first: T.Cast('int64', x) {symbol} {value:#x}",
        )
    wrapped = value % 2**bits
    if dtype.startswith("int") and wrapped >= 2 ** (bits - 1):
        wrapped -= 2**bits
    return tirx.const(wrapped, dtype)


def _by_operand_type(original: Callable[[Any, Any], Any], symbol: str) -> Callable[[Any, Any], Any]:
    def operator(self: Any, other: Any) -> Any:
        if isinstance(other, builtins.int) and not isinstance(other, bool):
            dtype = str(getattr(self, "ty", ""))
            if integer_range(dtype) is not None:
                other = _mask_constant(other, dtype, symbol)
        return original(self, other)

    operator.__name__ = original.__name__
    operator.__doc__ = original.__doc__
    setattr(operator, _CONVERTED, True)
    return operator


def convert_int_operands() -> None:
    """Make ``expr & int`` (and ``|``, ``^``, either side) convert the int to ``expr``'s
    integer type; a no-op when already done. Other operand types go to TVM unchanged."""
    for name in _BITWISE:
        original = getattr(ExprOperand, name)
        if getattr(original, _CONVERTED, False):
            continue
        symbol = _SYMBOL[name.strip("_").removeprefix("r")]  # __rand__ -> and, __ror__ -> or
        setattr(ExprOperand, name, _by_operand_type(original, symbol))
