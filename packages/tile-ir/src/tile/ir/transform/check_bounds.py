"""Passes ``mark_source_lines`` and ``check_bounds``: checked accesses (``TILE_CHECK=1``).

``mark_source_lines`` (before ``lower_tile_ops``) wraps each tile op in an
``AttrStmt(SOURCE_LINE, "file:line")``, so the loops its lowering makes still know the
line of the user's kernel. Needs: tile ops as ``Evaluate`` calls carrying their spans.

``check_bounds`` (after ``lower_tile_ops``, before the block grid is serialized) puts,
before every statement that loads or stores a global tensor or a shared buffer, a
test of each index against the buffer's extent; an access that fails it calls the
packed function ``CHECK_FAILED(tensor, "load"|"store", "file:line", bx, by, bz,
*indices, *extents)`` instead of running (the front end's runtime raises a typed error
that names them). A load under ``if_then_else(c, ...)`` is checked only where ``c``
holds. It consumes the ``SOURCE_LINE`` markers; a statement with no marker is located
by its own span, else by the kernel's ``def`` line. Needs: block indices bound by
``thread_extent`` attributes (``blockIdx.*``). Semantics of in-bounds runs are unchanged.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..annotations import CHECK_FAILED, KERNEL_SOURCE, SOURCE_LINE
from ..errors import location_from_span
from ..ops import op_class_of
from ._traverse import mutate
from .pipeline import Property, function_pass
from .properties import BLOCK_GRID, TILE_OPS, TILE_OPS_LOWERED


def _site_of(node: Any) -> str | None:
    where = location_from_span(getattr(node, "span", None))
    return f"{where.filename}:{where.line}" if where is not None else None


def _mark_func(func: Any) -> Any:
    """Wrap each tile op in a marker naming its source line (see module docstring)."""

    def on_evaluate(node: Any, m: Any) -> Any:
        site = _site_of(node) or _site_of(node.value)
        if op_class_of(node.value) is None or site is None:
            return node
        return tirx.AttrStmt(ir.StringImm(SOURCE_LINE), SOURCE_LINE, ir.StringImm(site), node)

    return func.with_body(mutate(func.body, [(tirx.Evaluate, on_evaluate)]))


def _checked(buffer: Any) -> bool:
    scope = str(buffer.scope())
    return scope == "global" or scope.startswith("shared")


def _accesses(expr: Any, path: Any, found: list[tuple[Any, Any, list[Any], str]]) -> None:
    """``(condition under which it runs, buffer, indices, kind)`` of each checked load in ``expr``."""
    is_call = isinstance(expr, ir.Call) and isinstance(expr.op, ir.Op)
    if is_call and str(expr.op.name).endswith("if_then_else"):
        cond, then, other = expr.args
        _accesses(cond, path, found)
        _accesses(then, cond if path is None else tirx.And(path, cond), found)
        negated = tirx.Not(cond)
        _accesses(other, negated if path is None else tirx.And(path, negated), found)
        return
    if isinstance(expr, ir.TensorLoad):
        for index in expr.indices:
            _accesses(index, path, found)
        if _checked(expr.source):
            found.append((path, expr.source, list(expr.indices), "load"))
        return
    children: list[Any] = []
    if isinstance(expr, ir.Call):
        children = list(expr.args)
    elif hasattr(expr, "a") and hasattr(expr, "b"):
        children = [expr.a, expr.b]
    elif isinstance(expr, tirx.Cast) or type(expr).__name__ == "Not":
        children = [expr.value if isinstance(expr, tirx.Cast) else expr.a]
    elif type(expr).__name__ == "Select":
        children = [expr.condition, expr.true_value, expr.false_value]
    elif type(expr).__name__ in ("Ramp", "Broadcast", "Let"):
        children = [getattr(expr, f) for f in ("base", "stride", "value", "body") if hasattr(expr, f)]
    for child in children:
        _accesses(child, path, found)


def _lanes(expr: Any) -> int:
    return int(tvm.DataType(str(expr.ty)).lanes)


def _scalar_ends(index: Any) -> list[Any] | None:
    """Scalars whose range covers every lane of ``index``: itself, a ramp's two ends, a
    broadcast's value; ``None`` for another vector."""
    if _lanes(index) == 1:
        return [index]
    if isinstance(index, tirx.Ramp):
        return [index.base, index.base + index.stride * (int(index.lanes) - 1)]
    if isinstance(index, tirx.Broadcast):
        return [index.value]
    return None


def _check_func(func: Any) -> Any:
    """Test every global and shared access against its buffer's extents (see module docstring)."""
    blocks: dict[str, Any] = {}

    def on_attr_walk(node: Any) -> None:
        if str(node.attr_key) == "thread_extent" and str(node.node.thread_tag).startswith("blockIdx"):
            blocks[str(node.node.thread_tag)[-1]] = node.node.var

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, on_attr_walk))
    block = [blocks.get(axis, tirx.const(0, "int32")) for axis in "xyz"]
    source = func.attrs.get(KERNEL_SOURCE) if func.attrs is not None else None
    sites = [str(source) if source is not None else ""]

    def guarded(stmt: Any, found: list[tuple[Any, Any, list[Any], str]]) -> Any:
        if not found:
            return stmt
        site = _site_of(stmt) or sites[-1]
        checks: list[Any] = []
        for path, buffer, indices, kind in found:
            shape = list(buffer.shape)
            inside: Any = None
            for index, extent in zip(indices, shape, strict=False):
                ends = _scalar_ends(index)
                if ends is None:
                    continue  # a vector index of no linear form: left unchecked
                for end in ends:
                    bound = extent if end.ty == extent.ty else tirx.Cast(str(end.ty), extent)
                    within = tirx.And(tirx.LE(tirx.const(0, str(end.ty)), end), tirx.LT(end, bound))
                    inside = within if inside is None else tirx.And(inside, within)
            if path is not None and _lanes(path) != 1:
                continue  # a per-lane condition: left unchecked
            indices = [ends[0] if (ends := _scalar_ends(i)) else i for i in indices]
            if inside is None:
                continue
            bad = tirx.Not(inside) if path is None else tirx.And(path, tirx.Not(inside))
            call = tirx.call_packed(
                CHECK_FAILED,
                str(buffer.name),
                kind,
                site,
                *[tirx.Cast("int32", b) for b in block],
                *[tirx.Cast("int64", i) for i in indices],
                *[tirx.Cast("int64", e) for e in shape],
            )
            checks.append(tirx.IfThenElse(bad, tirx.Evaluate(call), None))
        return tirx.SeqStmt([*checks, stmt]) if checks else stmt

    def on_attr(node: Any, m: Any) -> Any:
        if str(node.attr_key) != SOURCE_LINE:
            return m.default_mutate(node)
        sites.append(str(node.value.value))
        try:
            return m.mutate(node.body)
        finally:
            sites.pop()

    def on_store(node: Any, m: Any) -> Any:
        found: list[tuple[Any, Any, list[Any], str]] = []
        _accesses(node.value, None, found)
        for index in node.indices:
            _accesses(index, None, found)
        if _checked(node.buffer):
            found.append((None, node.buffer, list(node.indices), "store"))
        return guarded(node, found)

    def on_expr_stmt(node: Any, m: Any) -> Any:
        found: list[tuple[Any, Any, list[Any], str]] = []
        _accesses(node.value, None, found)
        return guarded(node, found)

    callbacks = [
        (tirx.AttrStmt, on_attr),
        (tirx.BufferStore, on_store),
        (tirx.Evaluate, on_expr_stmt),
        (tirx.Bind, on_expr_stmt),
    ]
    return func.with_body(mutate(func.body, callbacks))


SOURCE_LINES_MARKED = Property("source_lines_marked", "each tile op sits in a SOURCE_LINE attribute")
MARK_SOURCE_LINES = function_pass(
    _mark_func, name="mark_source_lines", needs={TILE_OPS}, guarantees={SOURCE_LINES_MARKED}
)
mark_source_lines = MARK_SOURCE_LINES.run
ACCESSES_CHECKED = Property(
    "accesses_checked", "every global and shared access is tested against its buffer's extent"
)
CHECK_BOUNDS = function_pass(
    _check_func, name="check_bounds", needs={TILE_OPS_LOWERED, BLOCK_GRID}, guarantees={ACCESSES_CHECKED}
)
check_bounds = CHECK_BOUNDS.run
