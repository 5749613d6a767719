"""Pass ``legalize_fp8``: fp8 conversions as exact integer arithmetic on the byte.

For targets whose code generator converts fp8 wrongly or not at all (TVM 0.27's LLVM
lowering gets subnormals wrong and cannot vectorize its conversions), every ``Cast``
into or out of ``float8_e4m3fn`` / ``float8_e5m2`` is rewritten as bit manipulation
that follows the OCP 8-bit floating point specification (OFP8, v1.0). Decoding is that of
``ml_dtypes``; encoding rounds as ``ml_dtypes`` does and saturates as the GPUs do:

* e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111
  is NaN; the largest finite value is 448 (0x7e).
* e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like: exponent 31 is
  inf (mantissa 0) or NaN; the largest finite value is 57344 (0x7b). NaN encodes as 0x7e
  with the sign.
* Encoding rounds to nearest, ties to even, and *saturates*: a value that rounds above the
  largest finite value, and +-inf, becomes that value with its sign (PTX's ``cvt.rn.satfinite``,
  which CUDA's ``__nv_fp8_*`` constructors, CUTLASS's fp8 types and so TileLang's generated
  code use; HIP's fp8 constructors saturate by default too). NaN stays NaN. ``ml_dtypes`` would
  give NaN (e4m3fn) or inf (e5m2) instead; torch saturates e4m3fn and not e5m2. One rule on
  every backend: a kernel's bytes on the CPU equal its bytes on a GPU.
* Both: subnormals (exponent field 0) are value ``m * 2^(1 - bias - mantissa_bits)``;
  -0 is kept; decoding NaN gives the quiet float32 NaN with the byte's sign.

Needs: tile ops lowered (conversions appear as ``Cast`` expressions), loops not
vectorized yet (scalar casts; vector-typed casts are left alone). Guarantees: no scalar
``Cast`` whose source or result type is fp8 is left; fp8 buffers are accessed (and pointed
into) as bytes (see ``_fp8_as_bytes``). The replacement chooses with mask arithmetic (no ``Select``,
no ``if_then_else``) and shifts by in-range amounts, so a loop around it can be
vectorized. Decoding is exact; encoding from float32 rounds once; other sources go
through float32 first, which is exact for float16, bfloat16 and every integer that
does not overflow fp8. float64 thus rounds twice, exactly as ml_dtypes' ``astype``
does (a float64 just off an fp8 tie can land on the other side of the tie than a
single rounding would put it).
"""

from __future__ import annotations

import dataclasses
import math
import struct
from typing import Any

import numpy as np
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..ops.region import dtype_of
from .pipeline import function_pass
from .properties import FP8_LEGALIZED, PARALLEL_NESTS, TILE_OPS_LOWERED


@dataclasses.dataclass(frozen=True)
class Fp8Format:
    """An OCP fp8 format: field widths and the codes of its special values."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    has_inf: bool

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def max_finite_code(self) -> int:
        """Magnitude code of the largest finite value (448 in e4m3fn, 57344 in e5m2)."""
        return 0x7B if self.has_inf else 0x7E

    @property
    def inf_code(self) -> int:
        return 0x7C

    @property
    def nan_code(self) -> int:
        """The magnitude code ml_dtypes writes for NaN."""
        return 0x7E if self.has_inf else 0x7F


FP8_FORMATS = {
    "float8_e4m3fn": Fp8Format("float8_e4m3fn", 4, 3, has_inf=False),
    "float8_e5m2": Fp8Format("float8_e5m2", 5, 2, has_inf=True),
}


@dataclasses.dataclass(frozen=True)
class _Ieee:
    """A binary IEEE float read through an unsigned integer of the same width."""

    bits: int
    mantissa_bits: int

    @property
    def bias(self) -> int:
        return (1 << (self.bits - self.mantissa_bits - 2)) - 1

    @property
    def uint(self) -> str:
        return f"uint{self.bits}"

    def u(self, value: int) -> Any:
        return tirx.const(value, self.uint)


_REINTERPRET = ir.Op.get("tirx.reinterpret")
_ACCESS_PTR = ir.Op.get("tirx.tvm_access_ptr")
_IF_THEN_ELSE = ir.Op.get("prim.if_then_else")
_FLOAT32 = _Ieee(32, 23)


def _i32(value: int) -> Any:
    return tirx.const(value, "int32")


def decode_fp8(value: Any, fmt: Fp8Format) -> Any:
    """The float32 equal to the fp8 expression ``value`` (bit-exact, as ml_dtypes)."""
    f32 = _FLOAT32
    m = fmt.mantissa_bits
    byte = tirx.Cast("uint32", _as_uint8(value))
    sign = (byte >> f32.u(7)) << f32.u(31)
    magnitude = byte & f32.u(0x7F)
    exponent = magnitude >> f32.u(m)
    mantissa = magnitude & f32.u((1 << m) - 1)
    # normal: move the fields into place and rebias the exponent
    normal = (magnitude << f32.u(f32.mantissa_bits - m)) + f32.u((f32.bias - fmt.bias) << f32.mantissa_bits)
    # subnormal: mantissa * 2^(1 - bias - m); the integer converts exactly, and scaling by a
    # power of two is a subtraction on the (always normal) float32 exponent field
    scaled = tirx.reinterpret("uint32", tirx.Cast("float32", mantissa))
    subnormal = _select(
        mantissa == f32.u(0), f32.u(0), scaled - f32.u((fmt.bias + m - 1) << f32.mantissa_bits)
    )
    bits = _select(exponent == f32.u(0), subnormal, normal)
    if fmt.has_inf:
        inf = f32.u(fmt.inf_code)
        bits = _select(magnitude == inf, f32.u(0x7F800000), bits)
        is_nan = magnitude > inf
    else:
        is_nan = magnitude == f32.u(0x7F)
    bits = _select(is_nan, f32.u(0x7FC00000), bits)
    return tirx.reinterpret("float32", bits | sign)


def encode_fp8(value: Any, fmt: Fp8Format) -> Any:
    """The float32 ``value`` rounded to ``fmt``: nearest-even, saturating at the largest finite value."""
    src = _FLOAT32
    m, ms = fmt.mantissa_bits, src.mantissa_bits
    u = tirx.reinterpret(src.uint, value)
    sign = tirx.Cast("int32", u >> src.u(src.bits - 1)) << _i32(7)
    magnitude = u & src.u((1 << (src.bits - 1)) - 1)
    is_nan = magnitude > src.u(((1 << (src.bits - ms - 1)) - 1) << ms)

    # normal range: round the dropped bits to nearest even in place (a carry out of the
    # mantissa bumps the exponent, as it should), then rebias the exponent
    shift = ms - m
    rounded = magnitude + src.u((1 << (shift - 1)) - 1) + ((magnitude >> src.u(shift)) & src.u(1))
    normal = tirx.Cast("int32", rounded >> src.u(shift)) - _i32((src.bias - fmt.bias) << m)
    normal = tirx.min(normal, _i32(fmt.max_finite_code))  # satfinite; inf lands here too

    # below fp8's smallest normal: count units of the subnormal spacing 2^(1 - bias - m)
    # in the significand (implicit bit included) with a variable shift, rounding the same way
    exponent = tirx.Cast("int32", magnitude >> src.u(ms))
    significand = (magnitude & src.u((1 << ms) - 1)) | src.u(1 << ms)
    # ms + 2 already shifts every significand to 0 (and rounds down); the lower clamp only
    # keeps the unused lanes of the normal range in range
    amount = tirx.max(tirx.min(_i32(src.bias + ms + 1 - fmt.bias - m) - exponent, _i32(ms + 2)), _i32(1))
    amount_u = tirx.Cast(src.uint, amount)
    half_minus_one = (src.u(1) << (amount_u - src.u(1))) - src.u(1)
    odd = (significand >> amount_u) & src.u(1)
    subnormal = tirx.Cast("int32", (significand + half_minus_one + odd) >> amount_u)

    smallest_normal = src.u((src.bias - fmt.bias + 1) << ms)
    code = _select(magnitude < smallest_normal, subnormal, normal)
    code = _select(is_nan, _i32(fmt.nan_code), code)
    return tirx.reinterpret(fmt.name, tirx.Cast("uint8", code | sign))


def encode_constant(value: float, fmt: Fp8Format) -> int:
    """The byte of an fp8-typed constant ``value``, computed here (the code generator cannot
    fold a float's bits): what ``encode_fp8`` gives the float32 nearest it, except that an
    infinity of a type that has one stays infinity (``T.infinity("float8_e5m2")`` is that
    type's value, not a conversion: CUDA's ``numeric_limits`` give its bits)."""
    x = struct.unpack("<f", struct.pack("<f", value))[0]  # through float32, as encode_fp8
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign | fmt.nan_code
    m = fmt.mantissa_bits

    def magnitude(code: int) -> float:  # the field arithmetic of a finite code
        exponent, mantissa = code >> m, code & ((1 << m) - 1)
        if exponent == 0:
            return math.ldexp(mantissa, 1 - fmt.bias - m)
        return math.ldexp((1 << m) + mantissa, exponent - fmt.bias - m)

    if math.isinf(x) and fmt.has_inf:  # a constant of the type that is its infinity (T.infinity)
        return sign | fmt.inf_code
    if abs(x) >= magnitude(fmt.max_finite_code):  # satfinite (e4m3fn's +-inf included)
        return sign | fmt.max_finite_code
    # nearest, ties to the even code (the rounding of encode_fp8's integer arithmetic)
    code = min(range(fmt.max_finite_code + 1), key=lambda c: (abs(magnitude(c) - abs(x)), c & 1))
    return sign | code


def _select(condition: Any, if_true: Any, if_false: Any) -> Any:
    """``condition ? if_true : if_false`` for integers, as mask arithmetic.

    Not ``Select``: TVM turns a ``Select`` whose arms read memory into ``if_then_else``,
    which its LLVM code generator cannot vectorize; both arms are cheap and pure here.
    """
    dtype = dtype_of(if_true)
    # all ones where the condition holds; a product, since the simplifier may assume
    # that unsigned ``0 - x`` does not wrap
    ones = -1 if dtype.startswith("int") else (1 << int(dtype[len("uint") :])) - 1
    mask = tirx.Cast(dtype, condition) * tirx.const(ones, dtype)
    return if_false ^ ((if_true ^ if_false) & mask)


def _as_uint8(value: Any) -> Any:
    """The byte of the fp8 expression ``value`` (unwrapping a reinterpret of a byte)."""
    if isinstance(value, tirx.FloatImm) and dtype_of(value) in FP8_FORMATS:
        # an fp8 constant (T.fill, a literal store, the zero of a bounds-checked load): LLVM
        # cannot bitcast it, so encode it, to a constant byte
        return tirx.const(encode_constant(float(value.value), FP8_FORMATS[dtype_of(value)]), "uint8")
    if isinstance(value, ir.Call) and value.op.same_as(_REINTERPRET) and dtype_of(value.args[0]) == "uint8":
        return value.args[0]
    # a choice between fp8 values (a bounds-checked tile load: the value or 0) is a choice between
    # their bytes; an fp8-typed choice left in place reaches the code generator as an fp8 vector
    if isinstance(value, ir.Call) and value.op.same_as(_IF_THEN_ELSE):
        cond, then, other = value.args
        return tirx.if_then_else(cond, _as_uint8(then), _as_uint8(other))
    if isinstance(value, tirx.Select):
        return tirx.Select(value.condition, _as_uint8(value.true_value), _as_uint8(value.false_value))
    return tirx.reinterpret("uint8", value)


def _fp8_as_bytes(func: Any) -> Any:
    """``func`` with every fp8 buffer accessed as ``uint8`` (same shape, scope and strides).

    TVM's own fp8 legalization widens fp8 buffers and fp8-typed expressions to
    float32 and converts them back with its inexact code, which would undo the exact
    conversions. It leaves bytes alone: allocated fp8 buffers become byte buffers, and
    fp8 parameters are read and written through a byte view of their data (the
    signature keeps its fp8 types). Loads and stores reinterpret between the byte and
    the fp8 value, and ``_as_uint8`` cancels the pair around each conversion.
    """
    retyped: dict[Any, Any] = {}

    def on_alloc(node: Any) -> None:
        if str(node.buffer.dtype) in FP8_FORMATS:
            retyped[node.buffer] = node.buffer.with_dtype("uint8")

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
    views = []
    for param in func.params:
        if tirx.is_buffer_var(param) and str(param.dtype) in FP8_FORMATS:
            view = tirx.decl_buffer(
                param.shape,
                "uint8",
                name=str(param.name),  # the name the launch recipe and the caller know
                data=tirx.buffer_data(param),
                strides=param.strides,
                elem_offset=param.elem_offset,
                scope=param.scope(),
            )
            retyped[param] = view
            views.append(tirx.DeclBuffer(view, data=tirx.buffer_data(param)))
    if not retyped:
        return func

    def byte_buffer(buffer: Any) -> Any:
        for old, new in retyped.items():
            if buffer.same_as(old) or buffer.same_as(new):
                return new
        return None

    def on_load(load: Any) -> Any:
        new = byte_buffer(load.source)
        if new is None:
            return load
        return tirx.reinterpret(str(load.ty), tirx.BufferLoad(new, load.indices))

    def on_store(store: Any) -> Any:
        new = byte_buffer(store.buffer)
        if new is None:
            return store
        return tirx.BufferStore(new, _as_uint8(store.value), store.indices)

    def on_alloc_retype(node: Any) -> Any:
        new = byte_buffer(node.buffer)
        return node if new is None else tirx.AllocBuffer(new, node.annotations)

    def on_var(var: Any) -> Any:
        new = byte_buffer(var) if tirx.is_buffer_var(var) else None
        return var if new is None else new

    def on_call(call: Any) -> Any:
        # reinterpret(uint8, reinterpret(fp8, byte)) -> byte
        if call.op.same_as(_REINTERPRET) and dtype_of(call) == "uint8":
            return _as_uint8(call.args[0])
        # a pointer into a retyped buffer (an ldmatrix or TMA span) counts bytes: TVM's code
        # generator checks that its element type is the buffer's
        if call.op.same_as(_ACCESS_PTR) and dtype_of(call.args[0]) in FP8_FORMATS:
            return tirx.tvm_access_ptr(tirx.type_annotation("uint8"), *call.args[1:])
        return call

    callbacks = [
        (ir.Call, on_call),
        (ir.TensorLoad, on_load),
        (tirx.BufferStore, on_store),
        (tirx.AllocBuffer, on_alloc_retype),
        (ir.Var, on_var),
    ]
    body = tvm_ffi.structural_map(func.body, callbacks)
    return func.with_body(tirx.SeqStmt([*views, body]) if views else body)


def _legalize_cast(cast: Any) -> Any:
    target, source = dtype_of(cast), dtype_of(cast.value)
    if target == source or (target not in FP8_FORMATS and source not in FP8_FORMATS):
        return cast
    value = cast.value
    if source in FP8_FORMATS:
        value = decode_fp8(value, FP8_FORMATS[source])
        if target == "float32":
            return value
        if target not in FP8_FORMATS:
            return tirx.Cast(target, value)
    if dtype_of(value) != "float32":
        value = tirx.Cast("float32", value)
    return encode_fp8(value, FP8_FORMATS[target])


_FLOAT32_ARITHMETIC = (tirx.Min, tirx.Max, tirx.Add, tirx.Sub, tirx.Mul, tirx.Div)
"""Arithmetic on fp8 values (``T.max(a, b)`` of two fp8 loads): no fp8 unit computes it, and
CUDA's fp8 types have no ``max``/``min``/operators. It runs in float32 and is rounded back
once: exact for min and max (both operands are float32 values), one rounding for the others."""


def _fold(kind: type, a: float, b: float) -> float:
    """``kind`` (one of ``_FLOAT32_ARITHMETIC``) of two constants, in IEEE float32 as the code
    computes it (a NaN operand of a min or max gives NaN)."""
    x, y = np.float32(a), np.float32(b)
    with np.errstate(all="ignore"):
        if kind is tirx.Min or kind is tirx.Max:
            pick = np.fmin if kind is tirx.Min else np.fmax
            return float(np.nan if np.isnan(x) or np.isnan(y) else pick(x, y))
        ops = {tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.Div: np.divide}
        return float(ops[kind](x, y))


def _arithmetic_in_float32(body: Any) -> Any:
    """``_FLOAT32_ARITHMETIC`` on fp8 values as float32 arithmetic between casts. A min or max
    of fp8 values is one of them, so a min/max this rewrite made, read by another one (T.clamp:
    ``max(min(x, hi), lo)``), is read in float32 as it is: no decode of its encoding, which
    would repeat the whole encoding expression in the outer one's."""
    exact: list[Any] = []  # the Cast(fp8, min/max) nodes made here

    def widen(value: Any) -> Any:
        if any(value.same_as(made) for made in exact):
            return value.value
        return tirx.Cast("float32", value)

    def in_float32(node: Any) -> Any:
        fmt = dtype_of(node)
        if fmt not in FP8_FORMATS:
            return node
        if isinstance(node.a, tirx.FloatImm) and isinstance(node.b, tirx.FloatImm):
            # constants (``-T.infinity("float8_e5m2")`` is ``inf * -1``): folded here, so that the
            # type's infinity stays one (a conversion would saturate it)
            return tirx.FloatImm(fmt, _fold(type(node), float(node.a.value), float(node.b.value)))
        out = tirx.Cast(fmt, type(node)(widen(node.a), widen(node.b)))
        if isinstance(node, tirx.Min | tirx.Max):
            exact.append(out)
        return out

    return tvm_ffi.structural_map(body, [(kind, in_float32) for kind in _FLOAT32_ARITHMETIC])


def _legalize_func(func: Any) -> Any:
    """Rewrite fp8 ``Cast``s into integer bit arithmetic (see module docstring); fp8
    arithmetic first becomes float32 arithmetic between casts (``_FLOAT32_ARITHMETIC``)."""

    def on_cast(cast: Any) -> Any:
        return _legalize_cast(cast)

    func = func.with_body(_arithmetic_in_float32(func.body))
    func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.Cast, on_cast)))
    return _fp8_as_bytes(func)


LEGALIZE_FP8 = function_pass(
    _legalize_func, name="legalize_fp8", needs={TILE_OPS_LOWERED, PARALLEL_NESTS}, guarantees={FP8_LEGALIZED}
)
legalize_fp8 = LEGALIZE_FP8.run
