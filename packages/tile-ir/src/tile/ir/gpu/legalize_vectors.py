"""Vector expressions TVM's CUDA C generator prints wrong, rewritten into ones it prints right.

Runs on the device module just before source generation (``tile.ir.gpu.codegen``, which
both the CUDA and the ROCm backend print their kernels through). Two gaps, both hit by a ragged int8
copy into shared memory (``T.copy`` of a partial tile: ``if_then_else(in_bounds, load, 0)``
vectorized to 8 or 16 bytes, in the two copies ``split_dynamic_tails`` makes):

* an 8-bit integer ``Broadcast`` of 8 or 16 lanes (the ``0`` of the out-of-bounds arm)
  prints as ``make_int2(c, c, c, c, c, c, c, c)`` / ``make_int4`` with 16 arguments, which
  no compiler accepts (TVM packs only the 4-lane form into one ``int``); so does a 16-bit
  one of 4 or 8 lanes (``make_int4`` with 8 ``(short)0``; found by the program fuzzer on a
  ragged int16 copy). It becomes a ``reinterpret`` of a 32-bit broadcast of the packed
  element, which TVM prints through a temporary: ``int4 v_ = make_int4(0, 0, 0, 0); ...
  (*(int4 *)(&(v_)))``;
* ``CommonSubexprElim`` binds a vector index shared by both tail copies (a 16-lane
  ``Ramp``) to a variable of type ``int32x16``, which has no CUDA type ("Cannot convert
  type T.int32x16 to CUDA type"; an ``int32x8`` one prints as ``longlong4 x = __1;``).
  Bindings of index arithmetic (no loads, no calls) wider than 16 bytes are substituted
  back: TVM folds a ``Ramp`` index into the vector access it addresses;
* a 4-lane 8-bit integer ``Ramp`` (``T.cast(i + 1, "int8")`` over ``T.vectorized(4)``,
  which TVM folds into ``ramp((int8)1, (int8)1, 4)``) prints as ``make_int(...)`` /
  ``make_uint(...)``, which neither CUDA nor HIP defines (TVM keeps ``int8x4`` in one
  ``int``). It becomes a ``reinterpret`` of the packed 32-bit word: a constant when base
  and stride are, else the four lanes each masked to 8 bits and shifted into place.
* a store of a vector wider than 128 bits written as one statement (``packed[0:32] =
  T.Broadcast(v, 32)`` over int8, TileLang's issue 2480) has no CUDA type either
  ("Cannot convert type T.int8x32 to CUDA type"; a ``float32x8`` broadcast printed as
  ``make_float4`` with eight arguments). It becomes stores of 128-bit chunks, each lane
  range of the value sliced out of it (every chunk read into a variable first where the value
  reads the stored buffer elsewhere); a 256-bit broadcast of an 8- or 16-bit value at a
  32-byte aligned offset becomes one store of four packed 64-bit words (``make_longlong4``).

Before TVM's lowering, :func:`split_wide_vector_loops` cuts every ``T.vectorized`` loop
whose vectors would be wider than 128 bits (``T.vectorized(32)`` over int8 made
``int8x32``, ``T.vectorized(128)`` over float32 ``float32x128``: "Cannot convert type ...
to CUDA type") into a serial loop over vectorized chunks of at most 128 bits (narrower where
an access to a ``T.StridedTensor`` is not provably aligned to the chunk), and makes
serial a vectorized loop with a store its variable does not index (a sum into one element:
vectorized, each lane read the value from before the loop).
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx
from tvm.sym import Analyzer  # type: ignore[import-untyped]

from ..buffer_offsets import flat_offset

PACKED_BYTES = 4
"""Bytes of the integer an 8-bit broadcast is packed into."""


VECTOR_BITS = 128
"""The widest CUDA vector type (``int4``, ``uint4``, ``float4``)."""


def _lanes(dtype: str) -> int:
    return int(tvm.DataType(dtype).lanes)


def _too_wide(dtype: str) -> bool:
    """A vector wider than any CUDA vector type (``int32x16``; ``int32x8`` printed as ``longlong4``)."""
    data = tvm.DataType(dtype)
    return int(data.lanes) > 1 and int(data.lanes) * int(data.bits) > VECTOR_BITS


_NARROW_UNSIGNED = {"int8": "uint8", "uint8": "uint8", "int16": "uint16", "uint16": "uint16"}


def _wide_narrow_broadcast(node: Any) -> Any:
    dtype = str(node.ty)
    element, lanes = dtype.split("x")[0], _lanes(dtype)
    if element not in _NARROW_UNSIGNED:
        return node
    bits = int(tvm.DataType(element).bits)
    per_word = PACKED_BYTES * 8 // bits
    constant = isinstance(node.value, tirx.IntImm)
    if lanes < per_word or lanes % per_word or (lanes == per_word and constant):
        return node  # TVM packs a constant word itself; a variable one it refuses ("p.has_value()")
    mask = (1 << bits) - 1
    spread = sum(1 << (bits * i) for i in range(per_word))  # 0x01010101 or 0x00010001
    if constant:
        packed = tirx.const((int(node.value.value) & mask) * spread, "uint32")
    else:
        unsigned = tirx.Cast(_NARROW_UNSIGNED[element], node.value)
        packed = tirx.Cast("uint32", unsigned) * tirx.const(spread, "uint32")
    words = lanes // per_word
    return tirx.reinterpret(dtype, packed if words == 1 else tirx.Broadcast(packed, words))


def _packed_narrow_ramp(node: Any) -> Any:
    dtype = str(node.ty)
    element, lanes = dtype.split("x")[0], _lanes(dtype)
    bits = int(tvm.DataType(element).bits) if element in _NARROW_UNSIGNED else 0
    if bits != 8 or lanes * bits != PACKED_BYTES * 8:
        return node  # only the one-word form prints as an undefined make_int/make_uint
    base, stride = node.base, node.stride
    if isinstance(base, tirx.IntImm) and isinstance(stride, tirx.IntImm):
        start, step = int(base.value), int(stride.value)
        word = sum(((start + step * lane) & 0xFF) << (8 * lane) for lane in range(lanes))
        return tirx.reinterpret(dtype, tirx.const(word, "uint32"))
    packed = None
    for lane in range(lanes):
        value = base if lane == 0 else base + stride * tirx.const(lane, element)
        # masked: an int8 lane widens with its sign, and a uint8 sum that C++ computed in int
        # keeps its carry; either would spill into the next lane's byte
        part = tirx.bitwise_and(tirx.Cast("uint32", value), tirx.const(0xFF, "uint32"))
        if lane:
            part = tirx.shift_left(part, tirx.const(8 * lane, "uint32"))
        packed = part if packed is None else tirx.bitwise_or(packed, part)
    return tirx.reinterpret(dtype, packed)


def _is_index_arithmetic(expr: Any) -> bool:
    """No loads and no calls: recomputing it at every use changes nothing."""
    found = tvm_ffi.structural_walk(
        expr,
        [
            (ir.TensorLoad, lambda _: tvm_ffi.VisitInterrupt(True)),
            (ir.Call, lambda _: tvm_ffi.VisitInterrupt(True)),
        ],
    )
    return found is None


def _inline_vector_binds(body: Any) -> Any:
    values: dict[Any, Any] = {}

    def find(bind: Any) -> None:
        if not isinstance(bind.var.ty, ir.PrimType):  # a pointer (T.make_tensor's bound address)
            return
        if _too_wide(str(bind.var.ty)) and _is_index_arithmetic(bind.value):
            values[bind.var] = bind.value

    tvm_ffi.structural_walk(body, (tirx.Bind, find))
    if not values:
        return body

    def substitute(var: Any) -> Any:
        value = values.get(var)
        return var if value is None else tvm_ffi.structural_map(value, (tirx.Var, substitute))

    def drop(seq: Any) -> Any:
        kept = [s for s in seq.seq if not (isinstance(s, tirx.Bind) and s.var in values)]
        if len(kept) == len(seq.seq):
            return seq
        if not kept:
            return tirx.Evaluate(tirx.const(0, "int32"))
        return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

    body = tvm_ffi.structural_map(body, (tirx.SeqStmt, drop))
    return tvm_ffi.structural_map(body, (tirx.Var, substitute))


def _value_bits(body: Any) -> int:
    """Widest element, in bits, of the values a loop body loads, stores or casts to (0: none).

    Index arithmetic cast to the stored type (``T.cast(i + 1, "int8")``) does not count:
    TVM folds it into a ramp of the narrow type."""
    widths: list[int] = []

    def bits(*dtypes: Any) -> None:
        widths.extend(int(tvm.DataType(str(d)).bits) for d in dtypes)

    tvm_ffi.structural_walk(
        body,
        [
            (tirx.BufferStore, lambda node: bits(node.buffer.dtype)),
            (ir.TensorLoad, lambda node: bits(node.ty)),
            (tirx.Cast, lambda node: bits(node.ty)),
        ],
    )
    return max(widths, default=0)


def _chunk_lanes(extent: int, bits: int) -> int:
    """Lanes of one chunk: the largest power of two dividing ``extent`` within 128 bits."""
    lanes = max(VECTOR_BITS // bits, 1)
    while extent % lanes:
        lanes //= 2
    return lanes


def _stores_one_element(loop: Any) -> bool:
    """Whether some store of the loop's body writes an element its variable does not index.

    ``B[row] = B[row] + A[row, k]`` over a vectorized ``k`` is a sum, each iteration reading
    what the previous one wrote; vectorized, every lane read the value before the loop and
    one lane's sum was kept.
    """
    var = loop.loop_var
    found: list[Any] = []

    def on_store(store: Any) -> None:
        uses = tvm_ffi.structural_walk(
            list(store.indices),
            (tirx.Var, lambda v: tvm_ffi.VisitInterrupt(True) if v.same_as(var) else None),
        )
        if uses is None:
            found.append(store)

    tvm_ffi.structural_walk(loop.body, (tirx.BufferStore, on_store))
    return bool(found)


def _split_wide_loop(loop: Any) -> Any:
    if loop.kind != tirx.ForKind.VECTORIZED:
        return loop
    if _stores_one_element(loop):
        return tirx.For(
            loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body, None, loop.annotations
        )
    if not isinstance(loop.extent, tirx.IntImm):
        return loop
    extent, bits = int(loop.extent.value), _value_bits(loop.body)
    if bits == 0:
        return loop
    lanes = _chunk_lanes(extent, bits) if extent * bits > VECTOR_BITS else extent
    lanes = _strided_aligned_lanes(loop, lanes)
    if lanes == extent:
        return loop
    var = loop.loop_var
    outer = tirx.Var(f"{var.name}_chunk", str(var.ty))
    lane = tirx.Var(f"{var.name}_lane", str(var.ty))
    index = loop.min + outer * tirx.const(lanes, str(var.ty)) + lane
    body = tvm_ffi.structural_map(loop.body, (tirx.Var, lambda v: index if v.same_as(var) else v))
    kind = tirx.ForKind.VECTORIZED if lanes > 1 else tirx.ForKind.SERIAL
    inner = tirx.For(lane, 0, lanes, kind, body)
    return tirx.For(outer, 0, extent // lanes, tirx.ForKind.SERIAL, inner, None, loop.annotations)


def _strided_aligned_lanes(loop: Any, lanes: int) -> int:
    """The widest chunk (a power of two dividing ``lanes``) whose every access to a buffer with
    declared strides (a ``T.StridedTensor``) provably starts aligned to the chunk.

    TVM prints a contiguous vector access as one ``float4``/``float2`` access whatever its
    address; a strided view's rows start where its strides say (130 floats apart: 8-byte
    aligned only), and a misaligned vector access faults on a GPU. Row-major buffers are left
    as they were."""
    accesses: list[tuple[Any, list[Any]]] = []

    def visit(buffer: Any, indices: Any) -> None:
        if len(buffer.strides) and not str(buffer.scope()).startswith("local"):
            accesses.append((buffer, list(indices)))

    tvm_ffi.structural_walk(loop.body, [
        (tirx.BufferStore, lambda node: visit(node.buffer, node.indices)),
        (ir.TensorLoad, lambda node: visit(node.source, node.indices)),
    ])  # fmt: skip
    if not accesses:
        return lanes
    var, dtype = loop.loop_var, str(loop.loop_var.ty)
    outer = tirx.Var(f"{var.name}_chunk", dtype)
    while lanes > 1:
        analyzer = Analyzer()
        analyzer.bind(outer, ir.Range(0, int(loop.extent.value) // lanes))
        start = loop.min + outer * tirx.const(lanes, dtype)
        if all(
            analyzer.can_prove(tirx.floormod(_substituted(flat_offset(b, i), var, start), lanes) == 0)
            for b, i in accesses
        ):
            return lanes
        lanes //= 2
    return 1


def _substituted(expr: Any, var: Any, value: Any) -> Any:
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: value if v.same_as(var) else v))


def split_wide_vector_loops(mod: Any) -> Any:
    """``mod`` with every vectorized loop wider than 128 bits cut into 128-bit chunks, and
    every one that stores into an element all its iterations share made serial."""

    def split(func: Any) -> Any:
        body = tvm_ffi.structural_map(func.body, (tirx.For, _split_wide_loop))
        return func if body.same_as(func.body) else func.with_body(body)

    out = {gv: split(f) if isinstance(f, tirx.PrimFunc) else f for gv, f in mod.functions.items()}
    if all(out[gv].same_as(f) for gv, f in mod.functions.items()):
        return mod
    return tvm.IRModule(out, attrs=mod.attrs)


def _with_lanes(dtype: Any, lanes: int) -> str:
    element = str(dtype).split("x")[0]
    return element if lanes == 1 else f"{element}x{lanes}"


_ELEMENTWISE_CALLS = frozenset({"prim.if_then_else", "prim.likely"})
"""Calls whose result lane ``i`` reads only lane ``i`` of each vector argument."""


def _lane_slice(expr: Any, start: int, count: int) -> Any | None:
    """Lanes ``[start, start + count)`` of a vector expression, or None where the expression
    mixes its lanes (a shuffle, a reinterpret between widths, a vector variable)."""
    lanes = _lanes(str(expr.ty))
    if lanes == 1:
        return expr
    if isinstance(expr, tirx.Broadcast):
        return expr.value if count == 1 else tirx.Broadcast(expr.value, count)
    if isinstance(expr, tirx.Ramp):
        base = expr.base + expr.stride * tirx.const(start, str(expr.stride.ty)) if start else expr.base
        return base if count == 1 else tirx.Ramp(base, expr.stride, count)
    if isinstance(expr, ir.TensorLoad):
        indices = [_lane_slice(i, start, count) for i in expr.indices]
        return None if any(i is None for i in indices) else tirx.BufferLoad(expr.source, indices)
    if isinstance(expr, tirx.Cast):
        value = _lane_slice(expr.value, start, count)
        return None if value is None else tirx.Cast(_with_lanes(expr.ty, count), value)
    if isinstance(expr, tirx.Select):
        parts = [_lane_slice(e, start, count) for e in (expr.condition, expr.true_value, expr.false_value)]
        return None if any(p is None for p in parts) else tirx.Select(*parts)
    if isinstance(expr, tirx.Not):
        value = _lane_slice(expr.a, start, count)
        return None if value is None else tirx.Not(value)
    if isinstance(expr, ir.prim.expr.BinaryOpExpr):
        a, b = _lane_slice(expr.a, start, count), _lane_slice(expr.b, start, count)
        return None if a is None or b is None else type(expr)(a, b)
    if isinstance(expr, ir.Call) and isinstance(expr.op, ir.Op) and str(expr.op.name) in _ELEMENTWISE_CALLS:
        args = [_lane_slice(a, start, count) for a in expr.args]
        if any(a is None for a in args):
            return None
        return ir.Call(expr.op, args, ret_ty=_with_lanes(expr.ty, count))
    return None


def _reads_other_lanes_of(value: Any, store: Any) -> bool:
    """Whether ``value`` loads the stored buffer at other than the stored indices: split into
    chunks stored one after another, a later chunk could read what an earlier one wrote."""
    found: list[Any] = []

    def on_load(load: Any) -> None:
        if load.source.same_as(store.buffer) and not tvm_ffi.structural_equal(
            list(load.indices), list(store.indices)
        ):
            found.append(load)

    tvm_ffi.structural_walk(value, (ir.TensorLoad, on_load))
    return bool(found)


WORD_VECTOR_BITS = 256
"""A broadcast of this many bits of an 8- or 16-bit value is stored as four packed 64-bit
words (``make_longlong4`` / ``make_ulonglong4``): one statement for a 32-byte vector."""


def _packed_word_broadcast(store: Any) -> Any | None:
    """A 256-bit store of an 8/16-bit broadcast at a lane-aligned unit-stride ramp, as a store of
    four 64-bit words into the same memory (None: not that form)."""
    value, dtype = store.value, str(store.value.ty)
    bits = int(tvm.DataType(dtype).bits)
    if not isinstance(value, tirx.Broadcast) or bits not in (8, 16):
        return None
    if _lanes(dtype) * bits != WORD_VECTOR_BITS:
        return None
    if len(store.indices) != 1 or not isinstance(store.indices[0], tirx.Ramp):
        return None
    ramp, lanes = store.indices[0], _lanes(dtype)
    if not (isinstance(ramp.stride, tirx.IntImm) and int(ramp.stride.value) == 1):
        return None
    offset = Analyzer().modular_set(ramp.base)
    if int(offset.coeff) % lanes or int(offset.base) % lanes:
        return None  # a 32-byte vector store needs the vector's own alignment
    element = dtype.split("x")[0]
    word_type = "int64" if element.startswith("int") else "uint64"
    per_word = 64 // bits
    spread = sum(1 << (bits * i) for i in range(per_word))  # 0x0101010101010101 or 0x0001000100010001
    if isinstance(value.value, tirx.IntImm):
        word = (int(value.value.value) & ((1 << bits) - 1)) * spread
        packed = tirx.const(word - (1 << 64) if word_type == "int64" and word >= 1 << 63 else word, word_type)
    else:
        unsigned = f"uint{bits}"
        narrow = (
            tirx.Cast(unsigned, value.value)
            if element.startswith(("int", "uint"))
            else tirx.reinterpret(unsigned, value.value)
        )
        packed = tirx.Cast("uint64", narrow) * tirx.const(spread, "uint64")
        packed = packed if word_type == "uint64" else tirx.Cast(word_type, packed)
    buffer, count = store.buffer, WORD_VECTOR_BITS // 64
    data = tirx.buffer_data(buffer)
    name = f"{buffer.name}_words"
    words = tirx.decl_buffer((count,), word_type, name=name, data=data, scope=buffer.scope())
    index = tirx.Ramp(ramp.base // tirx.const(per_word, str(ramp.base.ty)), 1, count)
    return tirx.SeqStmt(
        [tirx.DeclBuffer(words, data=data), tirx.BufferStore(words, tirx.Broadcast(packed, count), [index])]
    )


def _split_wide_store(store: Any) -> Any:
    """A store of a vector wider than 128 bits as stores of 128-bit chunks (TVM's CUDA C
    generator has no type for ``int8x32``, ``float16x16``, ``bfloat16x16`` ...; it printed a
    ``float32x8`` broadcast as ``make_float4`` with eight arguments)."""
    dtype = str(store.value.ty)
    if not _too_wide(dtype):
        return store
    packed = _packed_word_broadcast(store)
    if packed is not None:
        return packed
    lanes, bits = _lanes(dtype), int(tvm.DataType(dtype).bits)
    chunk = _chunk_lanes(lanes, bits)
    parts = []
    for start in range(0, lanes, chunk):
        value = _lane_slice(store.value, start, chunk)
        indices = [_lane_slice(i, start, chunk) for i in store.indices]
        if value is None or any(i is None for i in indices):
            return store  # left for TVM, which names the type it cannot print
        parts.append((value, indices))
    if _reads_other_lanes_of(store.value, store):
        # every chunk is read into a variable before the first is stored
        chunk_type = _with_lanes(dtype, chunk)
        names = [tirx.Var(f"{store.buffer.name}_chunk{i}", chunk_type) for i in range(len(parts))]
        binds = [tirx.Bind(var, value) for var, (value, _) in zip(names, parts, strict=True)]
        stores = [tirx.BufferStore(store.buffer, var, at) for var, (_, at) in zip(names, parts, strict=True)]
        return tirx.SeqStmt([*binds, *stores])
    return tirx.SeqStmt([tirx.BufferStore(store.buffer, value, idx) for value, idx in parts])


_SCALAR_BITS = {
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
    "int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
}  # fmt: skip
"""numpy spellings of the scalar types a constant ``reinterpret`` is folded between."""


def _constant_reinterpret(call: Any) -> Any:
    """``reinterpret(type, constant)`` as the constant of the new type: TVM prints it as
    ``*(uint *)(&(1.000000e+00f))``, the address of a literal, which no compiler accepts
    (fp8 encoding of ``T.cast(i + 1, "float8_e4m3fn")`` in a one-lane vectorized loop)."""
    import numpy as np

    if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.reinterpret" and len(call.args) == 1):
        return call
    value, target, source = call.args[0], str(call.ty), str(call.args[0].ty)
    if not isinstance(value, tirx.FloatImm | tirx.IntImm):
        return call
    if target not in _SCALAR_BITS or source not in _SCALAR_BITS:
        return call
    if np.dtype(_SCALAR_BITS[target]).itemsize != np.dtype(_SCALAR_BITS[source]).itemsize:
        return call
    raw = np.array([value.value], dtype=_SCALAR_BITS[source]).view(_SCALAR_BITS[target])[0]
    return tirx.const(raw.item(), target)


def legalize_vectors(func: Any) -> Any:
    """``func`` with the vector expressions above rewritten (unchanged if it has none)."""
    body = _inline_vector_binds(func.body)
    body = tvm_ffi.structural_map(body, (ir.Call, _constant_reinterpret))
    body = tvm_ffi.structural_map(body, (tirx.BufferStore, _split_wide_store))
    body = tvm_ffi.structural_map(
        body, [(tirx.Broadcast, _wide_narrow_broadcast), (tirx.Ramp, _packed_narrow_ramp)]
    )
    return func if body.same_as(func.body) else func.with_body(body)


def legalize_vectors_module(mod: Any) -> Any:
    """:func:`legalize_vectors` on every ``PrimFunc`` of a device module."""
    out = {}
    changed = False
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            new = legalize_vectors(func)
            changed = changed or not new.same_as(func)
            out[gv] = new
        else:
            out[gv] = func
    if not changed:
        return mod
    return tvm.IRModule(out, attrs=mod.attrs)


__all__ = ["legalize_vectors", "legalize_vectors_module", "split_wide_vector_loops"]
