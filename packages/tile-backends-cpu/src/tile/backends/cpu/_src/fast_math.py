"""Pass ``inline_fast_exp``: float32 ``exp``/``exp2``/``tanh`` as straight-line, vectorizable arithmetic.

LLVM turns ``T.exp`` into one ``expf`` libm call per element, even inside vectorized
loops (and ``T.tanh`` into ``tanhf``, whose time also depends on the data). This pass
replaces every float32 ``exp(x)`` and ``exp2(x)`` with

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

``tanh(x)`` becomes, with ``a = |x|``: the odd Taylor series ``x * Q(x**2)`` through
``x**19`` where ``a < 0.625`` (truncation error below 1e-8 relative there), else
``sign(x) * (1 - e) / (1 + e)`` with ``e = exp(-2a)`` from the code above (no
cancellation: ``1 - e >= 0.7`` there). Both arms are computed and one is selected, so
the loop vectorizes; NaN propagates and +-inf give +-1. Measured: at most 1.5 ulp.

Needs: nothing (an expression rewrite; place it anywhere before code generation).
Guarantees: no float32 ``tirx.exp`` / ``tirx.exp2`` / ``tirx.tanh`` call is left.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.ir.transform import Property, function_pass

F32, I32 = "float32", "int32"
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LN2_HI = 0.693145751953125  # ln2 with 12 trailing zero bits: n * LN2_HI is exact
LN2_LO = 1.428606765330187e-06  # ln2 - LN2_HI
_TAYLOR = (1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0, 1.0)
# (lowest, highest) inputs kept; beyond them the result is already 0 or inf
_EXP_RANGE = (-104.0, 89.0)
_EXP2_RANGE = (-151.0, 129.0)
# tanh(x) = sum c_n x**(2n-1): c_n = 2**(2n) (2**(2n) - 1) B_2n / (2n)!, n = 1..10, highest first
_TANH_TAYLOR = (-0.00023912911424355248, 0.000590027440945586, -0.0014558343870513183,
                0.003592128036572481, -0.008863235529902197, 0.021869488536155203,
                -0.05396825396825397, 0.13333333333333333, -0.3333333333333333, 1.0)
_TANH_SERIES_BELOW = 0.625


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


def fast_tanh(x: Any) -> Any:
    """A float32 expression for ``tanh(x)``; see the module docstring."""
    xv, sq, mag, e = (tirx.Var(name, F32) for name in ("tx", "tsq", "ta", "te"))
    series: Any = _f(_TANH_TAYLOR[0])
    for coef in _TANH_TAYLOR[1:]:
        series = series * sq + _f(coef)
    series = tirx.Let(sq, xv * xv, xv * series)
    tail = (_f(1.0) - e) / (_f(1.0) + e)
    tail = tirx.Let(e, fast_exp(_f(-2.0) * mag), tirx.Select(xv < _f(0.0), -tail, tail))
    body = tirx.Select(mag < _f(_TANH_SERIES_BELOW), series, tail)
    return tirx.Let(xv, x, tirx.Let(mag, tirx.abs(xv), body))


def _is_nan(x: Any) -> Any:
    """``isnan`` from the bits (TVM's ``isnan`` intrinsic keeps a loop from vectorizing)."""
    magnitude = tirx.bitwise_and(tirx.reinterpret(I32, x), tirx.const(0x7FFFFFFF, I32))
    return magnitude > tirx.const(0x7F800000, I32)


def inline_fast_exp(func: Any) -> Any:
    """Replace float32 exp/exp2/tanh calls by polynomial code (module docstring)."""
    exp_op, exp2_op, tanh_op = (tvm.ir.Op.get(f"tirx.{name}") for name in ("exp", "exp2", "tanh"))

    def on_call(call: Any) -> Any:
        if str(call.ty) != F32:
            return call
        if call.op.same_as(tanh_op):
            return fast_tanh(call.args[0])
        base2 = call.op.same_as(exp2_op)
        if not (base2 or call.op.same_as(exp_op)):
            return call
        return fast_exp(call.args[0], base2)

    body = tvm_ffi.structural_map(func.body, (ir.Call, on_call))
    return func if body.same_as(func.body) else func.with_body(body)


FAST_EXP_INLINED = Property("fast_exp_inlined", "no float32 exp, exp2 or tanh call is left")
INLINE_FAST_EXP = function_pass(inline_fast_exp, guarantees={FAST_EXP_INLINED})
