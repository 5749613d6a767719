"""TileLang's fast-math intrinsics ``T.__exp`` ... ``T.__sin``.

tile computes the precise function (it has no approximate variant). A float16/bfloat16
value is computed in float32: CUDA has no 16-bit ``tan``, and the CPU none of them. As in
TileLang, the call itself is a ``Call`` of the value's 16-bit type (``T.__exp(x)`` of a
float16 ``x`` is a float16 call); ``expand_fast_math`` turns it into
``cast(float16, exp(cast(float32, x)))`` when its kernel has been parsed.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.ops.registry import ensure_op

from ..errors import TileTypeError

FAST_MATH_OP = "tile.fast_math"
"""``call_intrin(dtype, FAST_MATH_OP, name, x)``: a 16-bit fast-math call, computed in float32."""

_PRECISE = {
    op.__name__: op
    for op in (tirx.exp, tirx.exp10, tirx.log, tirx.log2, tirx.log10, tirx.tan, tirx.cos, tirx.sin)
}


_made = [False]
"""Whether any 16-bit fast-math call was made in this process (else a body has none to expand)."""


class FastMathTypeError(TileTypeError, TypeError):
    """A fast-math intrinsic (``T.__exp`` ...) applied to a value that is not floating point
    (also a ``TypeError``, as TileLang raises)."""


def _fast_math(name: str, precise: Any) -> Any:
    def intrinsic(x: Any) -> Any:
        value = tirx.const(x, "float32") if isinstance(x, float | int) and not isinstance(x, bool) else x
        dt = str(value.ty) if isinstance(value, ir.Expr) else type(x).__name__
        if not dt.startswith(("float", "bfloat")) or dt.startswith("float8") or dt.startswith("float4"):
            raise FastMathTypeError(
                f"T.{name} only supports floating-point inputs, but got {dt}",
                hint=f"cast the argument first: T.{name}(T.cast(x, 'float32'))",
            )
        if dt in ("float16", "bfloat16"):
            _made[0] = True
            ensure_op(FAST_MATH_OP)
            return tirx.call_intrin(dt, FAST_MATH_OP, ir.StringImm(precise.__name__), value)
        return precise(value)

    intrinsic.__name__ = intrinsic.__qualname__ = name
    intrinsic.__doc__ = (
        f"``T.{name}(x)``: TileLang's fast-math {precise.__name__} for float16/bfloat16/float32/float64 "
        f"values; tile computes the precise {precise.__name__} (it has no approximate variant), "
        "16-bit values in float32."
    )
    return intrinsic


FAST_MATH = {f"__{name}": _fast_math(f"__{name}", op) for name, op in _PRECISE.items()}
"""TileLang's ``T.__exp`` ... ``T.__sin``, by name."""


def expand_fast_math(body: Any) -> Any:
    """``body`` with each 16-bit fast-math call computed in float32 (see module docstring)."""
    if not _made[0]:
        return body

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == FAST_MATH_OP):
            return call
        name, value = str(call.args[0].value), call.args[1]
        return tirx.Cast(str(call.ty), _PRECISE[name](tirx.Cast("float32", value)))

    return tvm_ffi.structural_map(body, (ir.Call, on_call))
