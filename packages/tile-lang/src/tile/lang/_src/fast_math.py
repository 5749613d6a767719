"""16-bit calls of TileLang's fast-math intrinsics ``T.__exp`` ... ``T.__sin``.

The intrinsics (``compat_lang.FAST_MATH``) compute a float16/bfloat16 value in float32, as
CUDA's ``__expf`` ... are. As in TileLang, the call itself is a ``Call`` of the value's 16-bit
type (``T.__exp(x)`` of a float16 ``x`` is a float16 call): ``fast_math_16bit`` makes that call,
and ``expand_fast_math`` turns it into ``cast(float16, __expf(cast(float32, x)))`` when its
kernel has been parsed (before any target sees it).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.ops.registry import ensure_op

FAST_MATH_OP = "tile.fast_math"
"""``call_intrin(dtype, FAST_MATH_OP, intrinsic, x)``: a 16-bit fast-math call, computed in float32."""

_made = [False]
"""Whether any 16-bit fast-math call was made in this process (else a body has none to expand)."""


def fast_math_16bit(dtype: str, intrinsic: str, value: Any) -> Any:
    """``intrinsic`` (``"__expf"`` ...) of the 16-bit ``value``: a call of ``dtype``."""
    _made[0] = True
    ensure_op(FAST_MATH_OP)
    return tirx.call_intrin(dtype, FAST_MATH_OP, ir.StringImm(intrinsic), value)


def expand_fast_math(body: Any) -> Any:
    """``body`` with each 16-bit fast-math call computed in float32 (see module docstring)."""
    if not _made[0]:
        return body

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == FAST_MATH_OP):
            return call
        intrinsic, value = str(call.args[0].value), call.args[1]
        wide = tirx.call_pure_extern("float32", intrinsic, tirx.Cast("float32", value))
        return tirx.Cast(str(call.ty), wide)

    return tvm_ffi.structural_map(body, (ir.Call, on_call))
