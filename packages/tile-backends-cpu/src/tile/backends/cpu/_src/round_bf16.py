"""Pass ``round_bf16_casts``: every conversion to bfloat16 rounds, stored or not.

LLVM has no bfloat16 arithmetic that TVM 0.27 uses, so ``tvm.compile`` legalizes bf16
compute into float32 (``BF16ComputeLegalize``) and rounds only where a value is stored
into bf16 memory (``BF16StorageLegalize``). The compute legalizer turns
``Cast("bfloat16", x)`` of a float32 ``x`` into ``Cast("float32", x)``: the round trip
``T.cast(T.cast(x, "bfloat16"), "float32")`` gives ``x`` back unrounded (0.49999997
stays 0.49999997 where bfloat16 holds 0.5), and a cast that feeds more arithmetic keeps
float32's precision. The storage rounding (``bits + 0x7fff + lsb``) is right for every
finite value and for infinities but turns a NaN whose mantissa is all ones
(``0x7fffffff``) into -0.0. The GPU targets and the emulator round every conversion.

This pass replaces every ``Cast`` to bfloat16 by the bits of the rounded value, so the
legalizers see an exact widening only:

    b = reinterpret<uint32>(float32(x))
    bf16 = NaN(b) ? (b >> 16) | 0x0040            (quiet NaN, sign and top payload kept)
                  : (b + 0x7fff + ((b >> 16) & 1)) >> 16   (nearest, ties to even)

which is IEEE round-to-nearest-even on the bits: subnormals round like normals (bf16
has float32's exponent range), the largest finite float32 values round up to inf, inf
stays inf. Sources other than float32 are converted to float32 first: exact for
float16, bfloat16, fp8 and integers below 2**24; float64 and larger integers round
twice. float16 needs nothing: LLVM converts it with ``fptrunc``, which rounds.

Needs: nothing (an expression rewrite); it runs last, so the passes before it still see
the ``Cast`` they match (``stream_gemm_c`` replaces a whole bf16 epilogue by a
micro-kernel that rounds the same way). Guarantees: no ``Cast`` to bfloat16 is left.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.transform import Property, function_pass

BF16 = "bfloat16"
MAGNITUDE_MASK = 0x7FFFFFFF
INF_BITS = 0x7F800000
ROUND_BIAS = 0x7FFF
QUIET_BIT = 0x0040
"""Bit 6 of the bf16 pattern: the top mantissa bit, set in a quiet NaN."""


def _lanes(dtype: str) -> str:
    """The ``x<lanes>`` suffix of a vector dtype (``"bfloat16x8"`` -> ``"x8"``), else ``""``."""
    _, sep, lanes = dtype.partition("x")
    return sep + lanes if lanes.isdigit() else ""


def round_to_bf16(value: Any) -> Any:
    """A bfloat16 expression for ``value`` rounded to nearest even (module docstring)."""
    lanes = _lanes(str(value.ty))
    f32, u32, u16 = f"float32{lanes}", f"uint32{lanes}", f"uint16{lanes}"
    wide = value if str(value.ty) == f32 else tirx.Cast(f32, value)
    # The bits are written out at each use, not bound by a Let: TVM's bf16 storage legalizer
    # retypes bf16 buffers but not the loads inside a Let's value, so a Let reading a local
    # bf16 buffer ("Load/Store of buffer tile_lanes occurred before its declaration") failed.
    # LLVM folds the repeated expression into one.
    bits = tirx.reinterpret(u32, wide)

    def const(v: int) -> Any:
        return tirx.const(v, "uint32")

    high = tirx.shift_right(bits, const(16))
    nearest = tirx.shift_right(bits + const(ROUND_BIAS) + tirx.bitwise_and(high, const(1)), const(16))
    is_nan = tirx.bitwise_and(bits, const(MAGNITUDE_MASK)) > const(INF_BITS)
    rounded = tirx.Select(is_nan, tirx.bitwise_or(high, const(QUIET_BIT)), nearest)
    bf16_bits = tirx.Cast(u16, rounded)
    return tirx.reinterpret(f"{BF16}{lanes}", bf16_bits)


def round_bf16_casts(func: Any) -> Any:
    """Replace every ``Cast`` to bfloat16 by explicit rounding (module docstring)."""

    def on_cast(cast: Any) -> Any:
        target, source = str(cast.ty), str(cast.value.ty)
        if not target.startswith(BF16) or source.startswith(BF16):
            return cast
        return round_to_bf16(cast.value)

    body = tvm_ffi.structural_map(func.body, (tirx.Cast, on_cast))
    return func if body.same_as(func.body) else func.with_body(body)


BF16_CASTS_ROUNDED = Property("bf16_casts_rounded", "no Cast to bfloat16 is left")
ROUND_BF16_CASTS = function_pass(round_bf16_casts, guarantees={BF16_CASTS_ROUNDED})
