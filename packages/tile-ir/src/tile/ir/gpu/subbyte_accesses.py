"""Pass ``lower_subbyte_accesses``: element loads and stores of sub-byte types on their bytes.

A ``T.float4_e2m1fn``, ``int4`` or ``uint4`` tensor is packed storage (``tile.ir.packed``): two
codes per byte, element ``e`` (its offset in elements, through the tensor's strides) in byte
``e // 2``, the low nibble for even ``e`` (torch's ``float4_e2m1fn_x2``: the first value in bits
3..0). GPU C++ has no 4-bit type to index, so every access becomes byte arithmetic:

* a load is the code ``(bytes[e >> 1] >> 4 * (e & 1)) & 15``; a cast of it to another type
  decodes it (e2m1: sign, two exponent bits, one mantissa bit, values 0, 0.5, 1, 1.5, 2, 3, 4, 6;
  int4 sign-extended; uint4 as is), a store of it into a sub-byte tensor of the same type moves
  the code;
* a store into global or shared memory is ``tile::atomic_store_nibble(&bytes[e >> 1], e & 1,
  code)`` (``tile_gpu.h``): a compare-and-swap of the aligned 32-bit word holding the byte, so two
  threads writing the two nibbles of one byte (or neighbouring bytes) never lose each other's
  write, whatever the order; a store into a thread's own registers is a plain read-modify-write;
* a cast into a sub-byte type encodes: e2m1 rounds to nearest even and saturates at +-6, -0.0
  keeps its sign (as ml_dtypes' ``float4_e2m1fn``; NaN, which e2m1 lacks, gives 0), int4/uint4
  keep the low four bits.

Needs: bound loops (``PARALLEL_LOOPS_SCHEDULED``), shared layouts applied. Guarantees: no load
or store of a sub-byte buffer is left; the shared and local sub-byte buffers are byte buffers of
half as many elements, a parameter is read through a byte view of its data; a vectorized loop
that touched one is serial. A sub-byte value used in any other way (arithmetic on fp4 codes) is
refused at its line.
"""

from __future__ import annotations

import math
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..buffer_offsets import element_strides, flat_offset
from ..errors import TileError, UnsupportedOnTargetError, location_from_span
from ..packed import subbyte_bits
from ..transform import Property
from ..transform.pipeline import function_pass
from ..transform.properties import PARALLEL_LOOPS_SCHEDULED

STORE_NIBBLE = "tile::atomic_store_nibble"
"""``tile_gpu.h``'s nibble store (named ``atomic_`` so barrier planning sees the byte written)."""

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""The magnitudes of the e2m1 codes 0..7 (OCP MX e2m1); bit 3 is the sign."""

E2M1_MIDPOINTS = ((0.25, True, 0), (0.75, False, 1), (1.25, True, 2), (1.75, False, 3), (2.5, True, 4),
                  (3.5, False, 5), (5.0, True, 6))  # fmt: skip
"""``(midpoint, inclusive, code)``: a magnitude up to the midpoint between codes ``c`` and ``c + 1``
rounds to ``c``, the midpoint itself (``inclusive``) where ``c`` is the even one."""


def _is_subbyte(dtype: Any) -> bool:
    return subbyte_bits(str(dtype)) is not None


def _u8(value: int) -> Any:
    return tirx.const(value, "uint8")


def encode_e2m1(value: float) -> int:
    """The e2m1 code of a Python float: nearest, ties to even, saturating at +-6, NaN -> 0."""
    if value != value:
        return 0
    sign = 8 if math.copysign(1.0, value) < 0 else 0
    magnitude = abs(value)
    best = min(range(8), key=lambda c: (abs(E2M1_VALUES[c] - magnitude), c & 1))
    return sign | best


def _decode(code: Any, dtype: str) -> Any:
    """The value of the uint8 ``code`` of a ``dtype`` element: float32 for e2m1, int32 for ints."""
    if dtype == "uint4":
        return tirx.Cast("int32", code)
    if dtype == "int4":
        return tirx.Cast("int32", tirx.bitwise_xor(code, _u8(8))) - 8
    low = tirx.Cast("float32", tirx.bitwise_and(code, _u8(7)))
    magnitude = tirx.Select(
        low < 4.0, low * 0.5, tirx.Select(low < 6.0, low - 2.0, (low - 4.0) * 2.0)
    )  # codes 0-3: 0..1.5 by halves; 4, 5: 2, 3; 6, 7: 4, 6
    return tirx.Select(tirx.bitwise_and(code, _u8(8)) != _u8(0), -magnitude, magnitude)


def _encode(value: Any, dtype: str) -> Any:
    """The uint8 code of a numeric ``value`` cast to the sub-byte ``dtype``."""
    if dtype in ("int4", "uint4"):
        return tirx.Cast("uint8", tirx.bitwise_and(tirx.Cast("int32", value), tirx.const(15, "int32")))
    if isinstance(value, tirx.FloatImm | tirx.IntImm):
        return _u8(encode_e2m1(float(value.value)))
    x = tirx.Cast("float32", value)
    sign_bit = tirx.shift_right(tirx.reinterpret("uint32", x), tirx.const(31, "uint32"))
    negative = sign_bit != tirx.const(0, "uint32")
    magnitude = tirx.Select(negative, -x, x)
    # the midpoints between neighbouring magnitudes; a tie goes to the even code (<= vs <)
    code = _u8(7)
    for bound, inclusive, below in reversed(E2M1_MIDPOINTS):
        test = magnitude <= bound if inclusive else magnitude < bound
        code = tirx.Select(test, _u8(below), code)
    signed = tirx.Select(negative, tirx.bitwise_or(code, _u8(8)), code)  # -0.0 keeps its sign
    return tirx.Select(x != x, _u8(0), signed)  # NaN: e2m1 has none


def _mapped(node: Any, rules: Any) -> Any:
    """``tvm_ffi.structural_map(node, rules)``, a ``TileError`` a rule raised raised as it is (the
    FFI would turn it into a ``RuntimeError`` on its way through)."""
    failed: list[TileError] = []
    pairs = rules if isinstance(rules, list) else [rules]

    def guarded(rule: Any) -> Any:
        def apply(item: Any) -> Any:
            if failed:
                return item
            try:
                return rule(item)
            except TileError as error:
                failed.append(error)
                return item

        return apply

    out = tvm_ffi.structural_map(node, [(kind, guarded(rule)) for kind, rule in pairs])
    if failed:
        raise failed[0]
    return out


def _unsupported(expr: Any, where: Any) -> UnsupportedOnTargetError:
    dtype = str(expr.ty)
    return UnsupportedOnTargetError(
        f"a {dtype} value is used in {expr}: GPU code keeps {dtype} elements as packed 4-bit codes, "
        "which loads, stores and casts read",
        hint="cast it first, e.g. T.cast(x, 'float32'), and compute in that type",
        location=where,
    )


class _Rewriter:
    """The rewrite of one function: each sub-byte buffer's byte buffer, and every access."""

    def __init__(self, func: Any) -> None:
        self.func = func
        self.bytes: dict[Any, Any] = {}  # sub-byte buffer -> its byte buffer
        self.views: list[tuple[Any, Any]] = []  # (byte view, sub-byte parameter) of each parameter
        self.params = [p for p in func.params if tirx.is_buffer_var(p)]

    def byte_buffer(self, buffer: Any) -> Any:
        found = self.bytes.get(buffer)
        if found is not None:
            return found
        strides = element_strides(buffer)
        span: Any = tirx.const(1, "int32")
        for dim, stride in zip(buffer.shape, strides, strict=True):
            span = span + (dim - 1) * stride
        count = tirx.floordiv(span + 1, 2)
        name, scope = f"{buffer.name}_bytes", str(buffer.scope())
        if any(buffer.same_as(p) for p in self.params):
            # the parameter's name: the launch recipe names the tensor a kernel argument comes from
            name = str(buffer.name)
            view = tirx.decl_buffer((count,), "uint8", name, data=tirx.buffer_data(buffer), scope=scope)
            self.views.append((view, buffer))
        else:
            view = tirx.decl_buffer((count,), "uint8", name, scope=scope)
        self.bytes[buffer] = view
        return view

    def place(self, buffer: Any, indices: Any) -> tuple[Any, Any, Any]:
        """``(byte buffer, byte index, nibble 0/1)`` of ``buffer[indices]``."""
        offset = flat_offset(buffer, list(indices))
        return self.byte_buffer(buffer), tirx.shift_right(offset, 1), tirx.bitwise_and(offset, 1)

    def code(self, expr: Any, where: Any) -> Any:
        """The uint8 code of a sub-byte-typed expression."""
        dtype = str(expr.ty)
        if isinstance(expr, ir.TensorLoad):
            view, byte, nibble = self.place(expr.source, expr.indices)
            shift = tirx.Cast("uint8", nibble * 4)
            return tirx.bitwise_and(tirx.shift_right(tirx.BufferLoad(view, [byte]), shift), _u8(15))
        if isinstance(expr, tirx.Cast):
            inner = expr.value
            if _is_subbyte(inner.ty):
                if str(inner.ty) == dtype:
                    return self.code(inner, where)
                inner = _decode(self.code(inner, where), str(inner.ty))
            return _encode(self.value(inner, where), dtype)
        if isinstance(expr, tirx.FloatImm | tirx.IntImm):
            return _encode(expr, dtype)
        if isinstance(expr, tirx.Select):
            condition, chosen = self.value(expr.condition, where), self.code(expr.true_value, where)
            return tirx.Select(condition, chosen, self.code(expr.false_value, where))
        raise _unsupported(expr, where)

    def value(self, expr: Any, where: Any) -> Any:
        """``expr`` (of any type) with every cast out of a sub-byte type decoded."""

        def on_cast(cast: Any) -> Any:
            if _is_subbyte(cast.ty) or not _is_subbyte(cast.value.ty):
                return cast
            decoded = _decode(self.code(cast.value, where), str(cast.value.ty))
            return tirx.Cast(str(cast.ty), decoded)

        def on_load(load: Any) -> None:
            if _is_subbyte(load.source.dtype):  # a code read other than by a cast
                raise _unsupported(load, where)

        if _is_subbyte(expr.ty):
            return _decode(self.code(expr, where), str(expr.ty))
        out = _mapped(expr, (tirx.Cast, on_cast))
        tvm_ffi.structural_walk(out, (ir.TensorLoad, on_load))
        return out

    def store(self, store: Any) -> Any:
        where = location_from_span(getattr(store, "span", None))
        if not _is_subbyte(store.buffer.dtype):
            return tirx.BufferStore(store.buffer, self.value(store.value, where), list(store.indices))
        dtype = str(store.buffer.dtype)
        value = store.value
        code = self.code(value if _is_subbyte(value.ty) else tirx.Cast(dtype, value), where)
        view, byte, nibble = self.place(store.buffer, store.indices)
        if str(store.buffer.scope()).startswith("local"):  # the thread's own registers: no race
            shift = tirx.Cast("uint8", nibble * 4)
            other = tirx.bitwise_not(tirx.shift_left(_u8(15), shift))
            kept = tirx.bitwise_and(tirx.BufferLoad(view, [byte]), other)
            return tirx.BufferStore(view, tirx.bitwise_or(kept, tirx.shift_left(code, shift)), [byte])
        address = tirx.address_of(tirx.BufferLoad(view, [byte]))
        high, bits = tirx.Cast("int32", nibble), tirx.Cast("int32", code)
        return tirx.Evaluate(tirx.call_extern("int32", STORE_NIBBLE, address, high, bits))


def _touches_subbyte(stmt: Any) -> bool:
    found: list[bool] = []

    def on_store(node: Any) -> None:
        if _is_subbyte(node.buffer.dtype):
            found.append(True)

    def on_load(node: Any) -> None:
        if _is_subbyte(node.source.dtype):
            found.append(True)

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, on_store), (ir.TensorLoad, on_load)])
    return bool(found)


def lower_subbyte_func(func: Any) -> Any:
    """``func`` with every sub-byte load and store on bytes (see the module docstring)."""
    if not _touches_subbyte(func.body):
        return func
    rewriter = _Rewriter(func)

    def on_for(loop: Any) -> Any:
        if loop.kind == tirx.ForKind.VECTORIZED and _touches_subbyte(loop.body):
            return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body)
        return loop

    def on_alloc(node: Any) -> Any:
        if not _is_subbyte(node.buffer.dtype):
            return node
        return tirx.AllocBuffer(rewriter.byte_buffer(node.buffer))

    def on_evaluate(node: Any) -> Any:
        if not _touches_subbyte(node):
            return node
        where = location_from_span(getattr(node, "span", None))
        return tirx.Evaluate(rewriter.value(node.value, where))

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for))
    body = _mapped(body, (tirx.BufferStore, rewriter.store))
    body = _mapped(body, [(tirx.AllocBuffer, on_alloc), (tirx.Evaluate, on_evaluate)])
    if rewriter.views:
        views = [tirx.DeclBuffer(view, data=tirx.buffer_data(param)) for view, param in rewriter.views]
        body = tirx.SeqStmt([*views, body])
    return func.with_body(body)


SUBBYTE_ACCESSES_LOWERED = Property(
    "subbyte_accesses_lowered", "no load or store of a sub-byte (4-bit) buffer is left; their bytes are"
)
LOWER_SUBBYTE_ACCESSES = function_pass(
    lower_subbyte_func,
    name="lower_subbyte_accesses",
    needs={PARALLEL_LOOPS_SCHEDULED},
    guarantees={SUBBYTE_ACCESSES_LOWERED},
)

__all__ = ["E2M1_VALUES", "LOWER_SUBBYTE_ACCESSES", "STORE_NIBBLE", "encode_e2m1", "lower_subbyte_func"]
