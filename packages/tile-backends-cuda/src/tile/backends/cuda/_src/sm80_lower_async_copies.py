"""Pass ``lower_async_copies`` (sm_80+, last): the ring's producer copies become ``cp.async``.

Needs: bound, vectorized loops. Guarantees: inside ``tile.async_copy`` marks (the ring of
:mod:`.sm80_pipeline_async_copies`), a vectorized store ``shared[.. + v] = global[.. + v]``
of 4, 8 or 16 bytes becomes ``tile_cp_async_{4,8,16}`` (``tile_cuda/async.h``); one whose
value is ``if_then_else(cond, load, 0)`` with ``cond`` the same for the whole vector becomes
the ``_zfill`` form reading 0 bytes when ``cond`` fails. Anything else stays a plain store,
which the ring's barriers still order. No mark is left.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.buffer_offsets import flat_offset
from tile.ir.gpu.async_ring import ASYNC_COPY, PIPELINE_STATEMENT
from tile.ir.gpu.statements import extern_call as _extern
from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs
from tile.ir.transform.properties import PARALLEL_LOOPS_SCHEDULED, SHARED_LAYOUTS_APPLIED, statements_without
from tile.layout import dtype_bits


def _linear_in(expr: Any, var: Any, analyzer: Any) -> bool:
    """``expr`` is ``base + var`` (unit stride in ``var``)."""
    at0 = tvm_ffi.structural_map(expr, (ir.Var, lambda v: tirx.const(0, v.ty) if v.same_as(var) else v))
    diff = analyzer.simplify(expr - at0 - var)
    return isinstance(diff, tirx.IntImm) and int(diff.value) == 0


def _mentions(expr: Any, var: Any) -> bool:
    found: list[bool] = []
    tvm_ffi.structural_walk(expr, (ir.Var, lambda v: found.append(True) if v.same_as(var) else None))
    return bool(found)


def _at_zero(expr: Any, var: Any) -> Any:
    return tvm_ffi.structural_map(expr, (ir.Var, lambda v: tirx.const(0, v.ty) if v.same_as(var) else v))


def _conjuncts(cond: Any) -> list[Any]:
    if type(cond).__name__ == "And":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _uniform_condition(cond: Any, var: Any, lanes: int, analyzer: Any) -> Any | None:
    """``cond`` for the whole vector (its value at ``var = 0``), if every lane agrees.

    A conjunct ``x < b`` with ``x = base + var`` holds for all lanes exactly when it
    holds for lane 0 if ``base`` and ``b`` are multiples of ``lanes`` (a tile edge
    that does not cut a vector). Other conjuncts must not mention ``var``.
    """
    for part in _conjuncts(cond):
        if not _mentions(part, var):
            continue
        if type(part).__name__ != "LT":
            return None
        base = _at_zero(part.a, var)
        ok = _linear_in(part.a, var, analyzer)
        ok = ok and analyzer.can_prove(tirx.floormod(base, lanes) == 0)
        ok = ok and not _mentions(part.b, var) and analyzer.can_prove(tirx.floormod(part.b, lanes) == 0)
        if not ok:
            return None
    return _at_zero(cond, var)


def _copy_call(loop: Any, analyzer: Any) -> Any | None:
    """The cp.async call for a vectorized ``shared[...] = global[...]`` loop, or None."""
    store = loop.body
    if loop.kind != tirx.ForKind.VECTORIZED or not isinstance(store, tirx.BufferStore):
        return None
    if not isinstance(loop.extent, tirx.IntImm):
        return None
    lanes, var = int(loop.extent.value), loop.loop_var
    analyzer = tvm.sym.Analyzer()  # knows the lane range (swizzled indices split on it)
    analyzer.bind(var, ir.Range(0, lanes))
    dst = store.buffer
    if not str(dst.scope()).startswith("shared"):
        return None
    value, cond = store.value, None
    if isinstance(value, ir.Call) and str(value.op.name).endswith("if_then_else"):
        cond, value, other = value.args
        if not (isinstance(other, tirx.FloatImm | tirx.IntImm) and float(other.value) == 0.0):
            return None
        cond = _uniform_condition(cond, var, lanes, analyzer)
        if cond is None:
            return None
    if not isinstance(value, ir.TensorLoad):
        return None
    src = value.source
    if str(src.scope()) not in ("", "global") or str(src.dtype) != str(dst.dtype):
        return None
    nbytes = lanes * dtype_bits(str(dst.dtype)) // 8
    if nbytes not in (4, 8, 16):
        return None
    for buffer, indices in ((dst, store.indices), (src, value.indices)):
        # through a T.StridedTensor's strides: a transposed view's lanes are not consecutive
        flat = flat_offset(buffer, indices)
        if not _linear_in(flat, var, analyzer):  # consecutive lanes, consecutive elements
            return None
    dst_ptr = tirx.address_of(tirx.BufferLoad(dst, [_at_zero(i, var) for i in store.indices]))
    src_at = [_at_zero(i, var) for i in value.indices]
    if cond is None:
        return _extern(f"tile_cp_async_{nbytes}", dst_ptr, tirx.address_of(tirx.BufferLoad(src, src_at)))
    # Out of bounds: read 0 bytes from the (valid) first element, zero the destination.
    origin = [tirx.const(0, "int32") for _ in src_at]
    safe = [tirx.if_then_else(cond, i, o) for i, o in zip(src_at, origin, strict=True)]
    size = tirx.if_then_else(cond, tirx.const(nbytes, "int32"), tirx.const(0, "int32"))
    return _extern(
        f"tile_cp_async_zfill_{nbytes}", dst_ptr, tirx.address_of(tirx.BufferLoad(src, safe)), size
    )


def _lower_copies_func(func: Any) -> Any:
    analyzer = tvm.sym.Analyzer()

    def on_attr(node: Any) -> Any:
        key = str(node.attr_key)
        if key == PIPELINE_STATEMENT:
            return node.body
        if key != ASYNC_COPY:
            return node

        def on_for(loop: Any) -> Any:
            call = _copy_call(loop, analyzer)
            return loop if call is None else call

        return tvm_ffi.structural_map(node.body, (tirx.For, on_for))

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr)))


def lower_async_copies(mod: Any, ctx: CompileContext) -> Any:
    """Vectorized producer copies inside ``tile.async_copy`` marks become cp.async."""
    return map_prim_funcs(mod, _lower_copies_func)


ASYNC_COPIES_LOWERED = Property(
    "async_copies_lowered",
    "marked vectorized producer copies are tile_cp_async calls; no mark is left",
    check=statements_without(ASYNC_COPY, PIPELINE_STATEMENT),
)
LOWER_ASYNC_COPIES = Pass(
    "lower_async_copies",
    lower_async_copies,
    needs={PARALLEL_LOOPS_SCHEDULED, SHARED_LAYOUTS_APPLIED},
    guarantees={ASYNC_COPIES_LOWERED},
)


__all__ = ["ASYNC_COPIES_LOWERED", "LOWER_ASYNC_COPIES", "lower_async_copies"]
