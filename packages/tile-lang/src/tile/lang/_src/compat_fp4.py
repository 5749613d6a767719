"""``T.float4_e2m1_unpacked``: FP4 E2M1 values stored one per byte.

E2M1 (the OCP Microscaling formats' FP4) has a sign bit, two exponent bits (bias 1) and
one mantissa bit; its 16 codes are ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` and their negatives
(code ``8 + c`` is ``-value(c)``), with no infinity or NaN. The unpacked form keeps each
code in the low four bits of its own byte, so tensors and tiles of this type are ``uint8``
storage: ``T.alloc_shared(shape, T.float4_e2m1_unpacked)`` and
``T.Tensor(shape, T.float4_e2m1_unpacked)`` take ``uint8`` data.

In a kernel ``T.float4_e2m1_unpacked(x)`` encodes a float (round to nearest, ties to the
even code; magnitudes above 6 saturate to 6, as the MX spec allows for FP4; NaN gives 6) and
``T.float4_e2m1_unpacked.decode(code)`` gives the float32 value of a code.
"""

from __future__ import annotations

import math
from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

from .compat_lang import dtype

MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""The value of codes 0-7 (sign bit clear)."""

# Upper limits of each code's rounding interval: a tie goes to the even code, so the
# limit belongs to code c where c is even (<=) and to c + 1 where c is odd (<).
_LIMITS = tuple((MAGNITUDES[c] + MAGNITUDES[c + 1]) / 2 for c in range(7))


class Float4E2M1Unpacked(dtype):
    """The element type of ``T.float4_e2m1_unpacked`` (a ``uint8``-stored :class:`dtype`)."""

    def __new__(cls) -> Float4E2M1Unpacked:
        return super().__new__(cls, "uint8")  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "T.float4_e2m1_unpacked"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Float4E2M1Unpacked, ())

    @property
    def values(self) -> tuple[float, ...]:
        """The value of each of the 16 codes."""
        return MAGNITUDES + tuple(-m for m in MAGNITUDES)

    def is_float4_e2m1_unpacked(self) -> bool:
        return True

    def is_float4(self) -> bool:
        return True

    def is_float4_e2m1fn(self) -> bool:
        return False

    def __call__(self, value: Any = None) -> Any:
        """The code of ``value``: a ``uint8`` constant for a number, an expression in a kernel."""
        if value is None:
            return super().__call__(value)
        if isinstance(value, ir.Expr):
            return _encode_expr(value)
        return tirx.const(encode(float(value)), "uint8")

    def decode(self, code: Any) -> Any:
        """The float32 value of ``code`` (its low four bits): an expression in a kernel."""
        if not isinstance(code, ir.Expr):
            return self.values[int(code) & 0xF]
        bits = tirx.Cast("int32", code)
        magnitude = tirx.bitwise_and(bits, 7)
        value = tirx.const(MAGNITUDES[7], "float32")
        for c in reversed(range(7)):
            value = tirx.Select(tirx.EQ(magnitude, c), tirx.const(MAGNITUDES[c], "float32"), value)
        negative = tirx.NE(tirx.bitwise_and(bits, 8), 0)
        return tirx.Select(negative, tirx.Sub(tirx.const(0.0, "float32"), value), value)


def encode(value: float) -> int:
    """The E2M1 code of ``value`` (ties to even, saturating at +-6; -0.0 gives +0 and NaN +6,
    as the kernels' comparisons do)."""
    if math.isnan(value):
        return 7
    sign = 8 if value < 0 else 0
    magnitude = abs(value)
    for c, limit in enumerate(_LIMITS):
        if magnitude < limit or (magnitude == limit and c % 2 == 0):
            return sign | c
    return sign | 7


def _encode_expr(value: Any) -> Any:
    x = tirx.Cast("float32", value)
    magnitude = tirx.Select(
        tirx.LT(x, tirx.const(0.0, "float32")), tirx.Sub(tirx.const(0.0, "float32"), x), x
    )
    code = tirx.const(7, "int32")
    for c in reversed(range(7)):
        limit = tirx.const(_LIMITS[c], "float32")
        inside = tirx.LE(magnitude, limit) if c % 2 == 0 else tirx.LT(magnitude, limit)
        code = tirx.Select(inside, tirx.const(c, "int32"), code)
    sign = tirx.Select(tirx.LT(x, tirx.const(0.0, "float32")), tirx.const(8, "int32"), tirx.const(0, "int32"))
    return tirx.Cast("uint8", tirx.bitwise_or(code, sign))


float4_e2m1_unpacked = Float4E2M1Unpacked()
