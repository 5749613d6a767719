"""Pass ``mark_kernel_lines``: checked GPU kernels say which line of the user's kernel runs.

Under ``TILE_CHECK=1`` a GPU backend appends this pass to its pipeline. Before each
statement whose span names a line of the user's Python kernel (a store or loop the user
wrote, the loops a tile op was lowered to), it puts a call ``tile::kernel_line("file.py:LINE")``
where that line differs from the enclosing statement's, and one naming the kernel's ``def``
line where the launch's thread scopes begin. On a GPU the vendor header makes
the call nothing; under the emulator it records the line in the running thread, and a fault
of that thread (an out-of-bounds access, a race, a deadlock, a bad instruction operand, a
wild pointer) names it next to the generated source's line. Statements without a span run
under the last line their thread passed.

Vectorized loops are marked but not entered (a call in their body would stop them from being
vectorized), and ``AttrStmt`` scopes (thread extents) are never preceded by a call. Needs:
tile ops lowered. Nothing else changes: the calls touch no memory the kernel can see.
"""

from __future__ import annotations

from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import KERNEL_SOURCE
from ..errors import location_from_span
from ..transform._traverse import mutate
from ..transform.pipeline import Property, function_pass
from ..transform.properties import TILE_OPS_LOWERED

KERNEL_LINE = "tile::kernel_line"
"""The device-header entry point a checked kernel calls before each statement."""


def site_of(node: Any) -> str | None:
    """``"file.py:LINE"`` of ``node``'s span, or None."""
    where = location_from_span(getattr(node, "span", None))
    return f"{where.filename}:{where.line}" if where is not None else None


def _is_mark(node: Any) -> bool:
    value = getattr(node, "value", None)
    return (
        isinstance(value, ir.Call)
        and isinstance(value.op, ir.Op)
        and str(value.op.name) == "tirx.call_extern"
        and str(value.args[0].value) == KERNEL_LINE
    )


def _mark(site: str) -> Any:
    return tirx.Evaluate(tirx.call_extern("void", KERNEL_LINE, ir.StringImm(site)))


def mark_kernel_lines(func: Any) -> Any:
    """Mark each statement of ``func`` with its kernel line (see module docstring)."""
    source = func.attrs.get(KERNEL_SOURCE) if func.attrs is not None else None
    sites: list[str | None] = [str(source) if source is not None else None]

    def marked(node: Any, m: Any, *, enter: bool = True) -> Any:
        site = site_of(node)
        if site is None or site == sites[-1]:
            return m.default_mutate(node) if enter else node
        sites.append(site)
        try:
            inner = m.default_mutate(node) if enter else node
        finally:
            sites.pop()
        return tirx.SeqStmt([_mark(site), inner])

    def on_for(node: Any, m: Any) -> Any:
        return marked(node, m, enter=node.kind != tirx.ForKind.VECTORIZED)

    def on_statement(node: Any, m: Any) -> Any:
        # two parameters: structural_mutate passes a third (its in-place mode, 0 here) to a
        # callback that takes one, which as ``enter`` kept the branches of every ``if`` unmarked
        return marked(node, m)

    def on_evaluate(node: Any, m: Any) -> Any:
        return node if _is_mark(node) else marked(node, m)

    def on_attr(node: Any, m: Any) -> Any:
        inner = m.default_mutate(node)
        kernel = sites[0]
        if str(node.attr_key) != "thread_extent" or kernel is None:
            return inner
        body = inner.body
        if isinstance(body, tirx.AttrStmt) and str(body.attr_key) == "thread_extent":
            return inner  # not the innermost scope of the launch
        sites[0] = None  # once: the statements before the first line mark run as the kernel's def line
        return tirx.AttrStmt(inner.node, inner.attr_key, inner.value, tirx.SeqStmt([_mark(kernel), body]))

    callbacks = [
        (tirx.AttrStmt, on_attr),
        (tirx.For, on_for),
        (tirx.BufferStore, on_statement),
        (tirx.Evaluate, on_evaluate),
        (tirx.IfThenElse, on_statement),
        (tirx.While, on_statement),
    ]
    return func.with_body(mutate(func.body, callbacks))


KERNEL_LINES_MARKED = Property(
    "kernel_lines_marked", "each statement with a kernel line is preceded by tile::kernel_line"
)
MARK_KERNEL_LINES = function_pass(
    mark_kernel_lines, needs={TILE_OPS_LOWERED}, guarantees={KERNEL_LINES_MARKED}
)
