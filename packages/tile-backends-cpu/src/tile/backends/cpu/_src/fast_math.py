"""Pass ``inline_fast_exp``: float32 ``exp``/``exp2`` as straight-line, vectorizable arithmetic.

LLVM turns ``T.exp`` into one ``expf`` libm call per element, even inside vectorized
loops. This pass replaces every float32 ``exp(x)`` and ``exp2(x)`` with

    n = round(x * log2(e)),  r = x - n * ln2   (Cody-Waite split of ln2: hi part exact)
    exp(x) = P(r) * 2**n1 * 2**n2,            n1 = n >> 1, n2 = n - n1

where ``P`` is the degree-7 Taylor polynomial of ``e**r`` on ``|r| <= ln2/2``
(truncation error < 1e-8 relative, below half an ulp) and ``2**k`` is built from exponent
bits. Splitting ``2**n`` in two keeps both factors normal, so results in the subnormal
range round once, correctly scaled. ``x`` is clamped to [-104, 89] first: beyond it
the result is 0 (exp(-104) is below half the smallest subnormal) or overflows to
``inf`` by itself; NaN is passed through (tested from the bits: TVM's ``isnan`` does
not vectorize). Measured against float64 numpy: at most
1 ulp over the whole float32 range (``test_cpu_fast_math.py``).

Needs: nothing (an expression rewrite; place it anywhere before code generation).
Guarantees: no float32 ``tirx.exp`` / ``tirx.exp2`` call is left.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs

F32, I32 = "float32", "int32"
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LN2_HI = 0.693145751953125  # ln2 with 12 trailing zero bits: n * LN2_HI is exact
LN2_LO = 1.428606765330187e-06  # ln2 - LN2_HI
_TAYLOR = (1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0, 1.0)
# (lowest, highest) inputs kept; beyond them the result is already 0 or inf
_EXP_RANGE = (-104.0, 89.0)
_EXP2_RANGE = (-151.0, 129.0)


def _f(value: float) -> Any:
    return tirx.const(value, F32)


def _pow2(k: Any) -> Any:
    """``2**k`` as float32 for an int32 ``k`` in [-126, 127], from the exponent bits."""
    return tirx.reinterpret(F32, tirx.shift_left(k + tirx.const(127, I32), tirx.const(23, I32)))


def fast_exp(x: Any, base2: bool = False) -> Any:
    """A float32 expression for ``exp(x)`` (``exp2(x)`` with ``base2``); see the module docstring."""
    xv, xc, n, r, ni = (
        tirx.Var("fx", F32),
        tirx.Var("fxc", F32),
        tirx.Var("fn", F32),
        tirx.Var("fr", F32),
        tirx.Var("fni", I32),
    )
    poly: Any = _f(_TAYLOR[0])
    for coef in _TAYLOR[1:]:
        poly = poly * r + _f(coef)
    half = tirx.shift_right(ni, tirx.const(1, I32))
    body = poly * _pow2(half) * _pow2(ni - half)
    body = tirx.Let(ni, tirx.Cast(I32, n), body)
    if base2:
        low, high = _EXP2_RANGE
        body = tirx.Let(r, (xc - n) * _f(LN2), body)
        body = tirx.Let(n, tirx.floor(xc + _f(0.5)), body)
    else:
        low, high = _EXP_RANGE
        body = tirx.Let(r, (xc - n * _f(LN2_HI)) - n * _f(LN2_LO), body)
        body = tirx.Let(n, tirx.floor(xc * _f(LOG2E) + _f(0.5)), body)
    body = tirx.Let(xc, tirx.min(tirx.max(xv, _f(low)), _f(high)), body)
    return tirx.Let(xv, x, tirx.Select(_is_nan(xv), xv, body))


def _is_nan(x: Any) -> Any:
    """``isnan`` from the bits (TVM's ``isnan`` intrinsic keeps a loop from vectorizing)."""
    magnitude = tirx.bitwise_and(tirx.reinterpret(I32, x), tirx.const(0x7FFFFFFF, I32))
    return magnitude > tirx.const(0x7F800000, I32)


def _rewrite(func: Any) -> Any:
    exp_op, exp2_op = tvm.ir.Op.get("tirx.exp"), tvm.ir.Op.get("tirx.exp2")

    def on_call(call: Any) -> Any:
        base2 = call.op.same_as(exp2_op)
        if not (base2 or call.op.same_as(exp_op)) or str(call.ty) != F32:
            return call
        return fast_exp(call.args[0], base2)

    body = tvm_ffi.structural_map(func.body, (ir.Call, on_call))
    return func if body.same_as(func.body) else func.with_body(body)


def inline_fast_exp(mod: Any, ctx: CompileContext) -> Any:
    """Replace float32 exp/exp2 calls by polynomial code (module docstring)."""
    return map_prim_funcs(mod, _rewrite)


FAST_EXP_INLINED = Property("fast_exp_inlined", "no float32 exp or exp2 call is left")
INLINE_FAST_EXP = Pass(
    "inline_fast_exp",
    inline_fast_exp,
    guarantees={FAST_EXP_INLINED},
)
