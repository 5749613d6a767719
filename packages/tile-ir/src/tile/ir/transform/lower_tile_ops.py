"""Pass ``lower_tile_ops``: replace every tile-op call by its lowering for the target.

Needs: tile IR (tile-op calls as ``Evaluate`` statements; kernel grid as
``thread_extent`` attributes). Guarantees: no ``tile.*`` call is left; the
replacement loops carry ``T.Parallel`` annotations for later passes to schedule.
The rule for each op comes from ``register_lowering`` (target-specific, else generic).
Errors a rule raises point at the op's line in the user's kernel. Rules see the
layouts chosen by ``infer_layout`` (``LowerContext.layouts``) and the enclosing
``threadIdx.x`` variable (``LowerContext.thread_var``).
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.layout import SwizzledLayout

from ..errors import TileError, location_from_span
from ..ops import LowerContext, decode, op_class_of
from ._traverse import mutate, viewed_buffer
from .infer_layout import fragment_threads_of, layout_map_of
from .pipeline import CompileContext, context_function_pass
from .properties import LAYOUTS_INFERRED, TILE_OPS, TILE_OPS_LOWERED


def _spanned(stmt: Any, span: Any) -> Any:
    """``stmt`` (and each statement of a sequence) carrying the tile op's ``span``, so later
    passes and checked kernels (``mark_kernel_lines``) still know the op's line."""
    if span is None or location_from_span(getattr(stmt, "span", None)) is not None:
        return stmt
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_spanned(s, span) for s in stmt.seq], span=span)
    if isinstance(stmt, tirx.For):
        return tirx.For(
            stmt.loop_var, stmt.min, stmt.extent, stmt.kind, stmt.body, stmt.thread_binding, stmt.annotations,
            step=getattr(stmt, "step", None), span=span,
        )  # fmt: skip
    if isinstance(stmt, tirx.IfThenElse):
        return tirx.IfThenElse(stmt.condition, stmt.then_case, stmt.else_case, span=span)
    if isinstance(stmt, tirx.BufferStore):
        return tirx.BufferStore(stmt.buffer, stmt.value, stmt.indices, span=span)
    return stmt


def _swizzled_views(func: Any, layouts: dict[str, Any]) -> frozenset[str]:
    """Names of the views (of views ...) of buffers whose layout is a ``SwizzledLayout``."""
    swizzled = {name for name, layout in layouts.items() if isinstance(layout, SwizzledLayout)}
    views: set[str] = set()

    def find(decl: Any) -> None:
        base = viewed_buffer(decl)
        if base is not None and str(base.name) in swizzled | views:
            views.add(str(decl.buffer.name))

    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, find), order="pre")
    return frozenset(views)


def _lower_func(func: Any, ctx: CompileContext) -> Any:
    """Lower every tile op with the rules registered for ``ctx.target``."""
    analyzer = tvm.sym.Analyzer()
    threads: list[int | None] = [None]
    thread_vars: list[Any] = []
    layouts = layout_map_of(func)
    ranges = fragment_threads_of(func)
    swizzled_views = _swizzled_views(func, layouts)

    def on_attr(node: Any, m: Any) -> Any:
        if str(node.attr_key) == "thread_extent":
            iv = node.node
            analyzer.bind(iv.var, ir.Range(0, node.value))
            if str(iv.thread_tag) == "threadIdx.x":  # operators spread over threadIdx.x alone
                thread_vars.append(iv.var)
                if isinstance(node.value, tirx.IntImm):
                    threads[0] = int(node.value.value)
        return m.default_mutate(node)

    def on_for(node: Any, m: Any) -> Any:
        analyzer.bind(node.loop_var, ir.Range(node.min, node.min + node.extent))
        return m.default_mutate(node)

    def on_evaluate(node: Any, m: Any) -> Any:
        call = node.value
        if op_class_of(call) is None:
            return node
        op = decode(call)
        where = location_from_span(node.span) or location_from_span(getattr(call, "span", None))
        thread_var = thread_vars[-1] if thread_vars else None
        op_threads = threads[0]
        # an op on fragments laid out over threads first .. first + count - 1 (T.ws(g), see
        # infer_layout's FRAGMENT_THREADS) runs as if those threads were the block
        span = {ranges[str(r.buffer.name)] for r in op.regions() if str(r.buffer.name) in ranges}
        first = 0
        if len(span) == 1 and thread_var is not None:
            first, op_threads = span.pop()
            thread_var = tirx.Var(f"{thread_var.name}_active", "int32")
            analyzer.bind(thread_var, ir.Range(0, op_threads))
        lower_ctx = LowerContext(
            target=ctx.target,
            capabilities=ctx.capabilities,
            analyzer=analyzer,
            threads=op_threads,
            layouts=dict(layouts),
            location=where,
            thread_var=thread_var,
            swizzled_views=swizzled_views,
        )
        try:
            lowered = op.lower(lower_ctx)
        except TileError as exc:
            raise exc.with_location(where) from None
        if thread_vars and thread_var is not None and not thread_var.same_as(thread_vars[-1]):
            block_var = thread_vars[-1]
            lowered = tvm_ffi.structural_map(
                lowered, (ir.Var, lambda v: block_var - first if v.same_as(thread_var) else v)
            )
        return _spanned(lowered, node.span if where is not None else getattr(call, "span", None))

    body = mutate(func.body, [(tirx.AttrStmt, on_attr), (tirx.For, on_for), (tirx.Evaluate, on_evaluate)])
    return func.with_body(body)


LOWER_TILE_OPS = context_function_pass(
    _lower_func, name="lower_tile_ops", needs={TILE_OPS, LAYOUTS_INFERRED},
    guarantees={TILE_OPS_LOWERED}, invalidates={TILE_OPS})  # fmt: skip
lower_tile_ops = LOWER_TILE_OPS.run
