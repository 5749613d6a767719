"""Negative element indices count from the end of their dimension, as in Python and TileLang.

``A[-1]`` is ``A[n - 1]``; inside ``for i in T.serial(4)``, ``A[i - 2]`` reads ``A[n - 2]``,
``A[n - 1]``, ``A[0]``, ``A[1]``. Once a kernel is parsed, each element index of a load or
store in its body is bounded from the loops and launch extents around it:

* never negative (the usual case): unchanged;
* always negative: ``index + extent``;
* negative for some iterations only: ``select(index < 0, index + extent, index)``, per lane
  for a ``T.Ramp`` index;
* unbounded (a symbolic scalar parameter): unchanged, as TileLang leaves it.

Only tensors in global memory (the kernel's parameters) are rewritten: indices into shared
tiles and fragments keep the affine form their layouts are inferred from. Tile operators'
regions (``T.copy(A[i - 1, 0], S)``) keep their own bounds handling and are not touched.
Without this, such an index read or wrote outside the tensor silently.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]

_UNBOUNDED = -(1 << 30)
"""A lower bound at or below this comes from a variable's dtype, not from loops: unknown sign."""


def wrap_negative_indices(body: Any) -> Any:
    """``body`` with every possibly negative element index of a load or store wrapped."""
    analyzer = tvm.sym.Analyzer()

    def bind_loop(loop: Any) -> None:
        analyzer.bind(loop.loop_var, ir.Range.from_min_extent(loop.min, loop.extent))

    def bind_launch(attr: Any) -> None:
        if attr.attr_key == "thread_extent" and isinstance(attr.node, tirx.IterVar):
            analyzer.bind(attr.node.var, ir.Range.from_min_extent(0, attr.value))

    def bind_value(stmt: Any) -> None:
        if str(stmt.var.ty).startswith(("int", "uint")):
            analyzer.bind(stmt.var, stmt.value)

    tvm_ffi.structural_walk(
        body, [(tirx.For, bind_loop), (tirx.AttrStmt, bind_launch), (tirx.Bind, bind_value)]
    )

    def wrap(index: Any, extent: Any) -> Any:
        if not isinstance(index, ir.Expr) or not str(index.ty).startswith("int"):
            return index
        ramp = isinstance(index, tirx.Ramp)
        lanes = int(index.lanes) if ramp else 1
        ends = [index.base, index.base + index.stride * (lanes - 1)] if ramp else [index]
        bounds = [analyzer.const_int_bound(e) for e in ends]
        low, high = min(b.min_value for b in bounds), max(b.max_value for b in bounds)
        if low >= 0 or low <= _UNBOUNDED:
            return index
        scalar = str(index.base.ty) if ramp else str(index.ty)
        size = extent if str(extent.ty) == scalar else tirx.Cast(scalar, extent)
        if not ramp:
            return (
                analyzer.simplify(index + size) if high < 0 else tirx.Select(index < 0, index + size, index)
            )
        shift = tirx.Broadcast(size, lanes)
        if high < 0:
            return index + shift
        return tirx.Select(index < tirx.Broadcast(tirx.const(0, scalar), lanes), index + shift, index)

    def indices_of(source: Any, indices: Any) -> list[Any]:
        shape = list(source.shape)
        if len(shape) != len(indices) or str(source.scope()) != "global":
            return list(indices)
        return [wrap(i, e) for i, e in zip(indices, shape, strict=True)]

    def in_expr(expr: Any) -> Any:
        def on_load(load: Any) -> Any:
            new = indices_of(load.source, load.indices)
            return load if _same(new, load.indices) else tirx.BufferLoad(load.source, new)

        return tvm_ffi.structural_map(expr, (TensorLoad, on_load))

    def on_store(store: Any) -> Any:
        value = in_expr(store.value)
        indices = indices_of(store.buffer, [in_expr(i) for i in store.indices])
        if value.same_as(store.value) and _same(indices, store.indices):
            return store
        return tirx.BufferStore(store.buffer, value, indices, span=store.span)

    def on_bind(stmt: Any) -> Any:
        value = in_expr(stmt.value)
        return stmt if value.same_as(stmt.value) else tirx.Bind(stmt.var, value, span=stmt.span)

    def on_if(stmt: Any) -> Any:
        cond = in_expr(stmt.condition)
        if cond.same_as(stmt.condition):
            return stmt
        return tirx.IfThenElse(cond, stmt.then_case, stmt.else_case, span=stmt.span)

    return tvm_ffi.structural_map(
        body, [(tirx.BufferStore, on_store), (tirx.Bind, on_bind), (tirx.IfThenElse, on_if)]
    )


def _same(new: list[Any], old: Any) -> bool:
    return all(a.same_as(b) for a, b in zip(new, old, strict=True))
