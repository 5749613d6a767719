"""Fragments that live inside one warp-aligned range of a block's threads (``T.ws(g)``,
``if tx >= 128:``), and the check that no operator inside such a range runs on a fragment
laid out over the whole block (its other threads' elements would never be computed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.layout import Fragment, Layout

from ..errors import LayoutInferenceError, location_from_span
from ..ops import decode, op_class_of
from ..ops.layout_rules import is_fragment_buffer
from ._layout_items import Nest, OpItem, first_span, is_parallel, mentions_var, parallel_nest
from ._thread_values import thread_values


def passing_threads(cond: Any, thread_var: Any, threads: int, analyzer: Any) -> list[int] | None:
    """The threads of the block for which ``cond`` (a condition on ``thread_var`` alone) holds;
    None when it depends on anything else."""
    values = thread_values(cond, thread_var, threads, analyzer)
    return None if values is None else [t for t, value in enumerate(values) if value]


def active_thread_range(conditions: list[Any], thread_var: Any, threads: int) -> tuple[int, int] | None:
    """``(first, count)`` when the enclosing ``conditions`` keep only the threads
    ``first .. first + count - 1`` of the block (``if tx < 128``, ``T.ws(1)``), else None."""
    if not conditions:
        return None
    analyzer = tvm.sym.Analyzer()
    analyzer.bind(thread_var, ir.Range(0, threads))
    joined = conditions[0]
    for cond in conditions[1:]:
        joined = tirx.And(joined, cond)
    with analyzer.constraint_scope(joined):
        bound = analyzer.const_int_bound(thread_var)
        first, last = int(bound.min_value), int(bound.max_value)
    if (first, last) == (0, threads - 1):
        # the bound analysis does not see through ``tx // 128 == 1`` (T.ws): where the
        # condition depends on the thread alone, ask it of every thread
        passing = passing_threads(joined, thread_var, threads, analyzer)
        if passing is None or not passing:
            return None
        first, last = passing[0], passing[-1]
        contiguous = len(passing) == last - first + 1
        return (first, len(passing)) if contiguous and len(passing) < threads else None
    if last < first:
        return None
    with analyzer.constraint_scope(tirx.And(thread_var >= first, thread_var <= last)):
        if not analyzer.can_prove(joined):
            return None  # not every thread of the range passes (tx % 2 == 0, ...)
    return first, last - first + 1


def thread_conditions(body: Any) -> tuple[Any, dict[Any, list[Any]]]:
    """The block's ``threadIdx.x`` and, for each statement under an ``if`` on it (``T.ws``
    included), the conditions that enclose it, outermost first (keyed by ``__chandle__``)."""
    thread_vars: list[Any] = []

    def on_attr(node: Any) -> None:
        if str(node.attr_key) == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x":
            thread_vars.append(node.node.var)

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, on_attr))
    enclosing: dict[Any, list[Any]] = {}
    if len(thread_vars) != 1:
        return None, enclosing
    tx = thread_vars[0]

    def on_if(node: Any) -> None:
        if not mentions_var([node.condition], tx):
            return
        for cond, branch in ((node.condition, node.then_case), (tirx.Not(node.condition), node.else_case)):
            if branch is None:
                continue

            def mark(inner: Any, cond: Any = cond) -> None:
                enclosing.setdefault(inner.__chandle__(), []).append(cond)

            tvm_ffi.structural_walk(branch, [(tirx.Evaluate, mark), (tirx.For, mark)])

    tvm_ffi.structural_walk(body, (tirx.IfThenElse, on_if), order="pre")
    return tx, enclosing


FRAGMENT_THREADS = "tile.fragment_threads"
"""Function attribute: fragment name -> ``[first, count]`` for a fragment every use of which
runs inside one condition keeping threads ``first .. first + count - 1`` (``T.ws(g)``): its
layout is over ``count`` threads, thread ``t`` of it being ``threadIdx.x == first + t``."""


def item_fragments(item: OpItem | Nest) -> list[str]:
    if isinstance(item, Nest):
        buffers = [acc.buffer for acc in item.accesses]
    else:
        buffers = [region.buffer for region in item.op.regions()]
    return sorted({str(b.name) for b in buffers if is_fragment_buffer(b)})


def thread_ranges(
    func: Any, threads: int, items: list[OpItem | Nest]
) -> tuple[dict[str, tuple[int, int]], dict[int, int]]:
    """Fragments used only inside one warp-aligned thread range (``T.ws(g)``), with the range,
    and the thread count of each item on such fragments (keyed by ``id``)."""
    if threads <= 1:
        return {}, {}
    tx, enclosing = thread_conditions(func.body)
    if tx is None or not enclosing:
        return {}, {}
    item_range: dict[int, tuple[int, int] | None] = {}
    uses: dict[str, set[tuple[int, int] | None]] = {}
    for item in items:
        key = item.loops[0].__chandle__() if isinstance(item, Nest) else item.key
        active = active_thread_range(enclosing.get(key, []), tx, threads)
        if active is not None and (active[0] % 32 or active[1] % 32):
            active = None  # not whole warps: the gemm's warps could not be the range's
        item_range[id(item)] = active
        for name in item_fragments(item):
            uses.setdefault(name, set()).add(active)
    ranges: dict[str, tuple[int, int]] = {}
    for name, found in uses.items():
        only = next(iter(found))
        if len(found) == 1 and only is not None:
            ranges[name] = only
    changed = True
    while changed:  # an item mixing ranged and block-wide fragments makes them all block-wide
        changed = False
        for item in items:
            names = item_fragments(item)
            if any(n in ranges for n in names) and not all(
                ranges.get(n) == item_range[id(item)] for n in names
            ):
                for n in names:
                    changed |= ranges.pop(n, None) is not None
    counts = {
        id(item): ranges[names[0]][1]
        for item in items
        if (names := item_fragments(item)) and names[0] in ranges
    }
    return ranges, counts


def check_thread_ranges(
    func: Any, threads: int, known: Mapping[str, Layout], ranges: Mapping[str, tuple[int, int]]
) -> None:
    """A tile operator or ``T.Parallel`` nest on a fragment runs, inside a condition that keeps
    only threads ``[a, b)`` of the block (``T.ws(g)``, ``if tx < 128:``), on those threads alone,
    while the fragment is spread over every thread of the block: the elements the other threads
    hold would never be computed. Raise instead of returning a silently wrong result."""
    if threads <= 1:
        return
    tx, enclosing = thread_conditions(func.body)
    if tx is None or not enclosing:
        return
    inside: set[Any] = set()

    def fragments_of(node: Any) -> list[Any]:
        if isinstance(node, tirx.Evaluate):
            return [r.buffer for r in decode(node.value).regions() if is_fragment_buffer(r.buffer)]
        touched: list[Any] = []

        def visit(buffer: Any) -> None:
            if is_fragment_buffer(buffer) and all(not buffer.same_as(b) for b in touched):
                touched.append(buffer)

        tvm_ffi.structural_walk(
            node,
            [(tirx.BufferStore, lambda s: visit(s.buffer)), (ir.TensorLoad, lambda e: visit(e.source))],
        )
        return touched

    def on_stmt(node: Any) -> Any:
        if isinstance(node, tirx.Evaluate):
            if op_class_of(node.value) is None:
                return None
            where = location_from_span(node.span)
            what = "T." + decode(node.value).op_name.split(".", 1)[1]
        elif is_parallel(node) and node not in inside:
            inside.update(parallel_nest(node))
            where = location_from_span(node.span) or first_span(node)
            what = "T.Parallel loop"
        else:
            return None
        conditions = enclosing.get(node.__chandle__())
        active = active_thread_range(conditions or [], tx, threads)
        if active is None:
            return None
        first, count = active
        for buffer in fragments_of(node):
            if ranges.get(str(buffer.name)) == active:
                continue  # laid out over the range's threads (FRAGMENT_THREADS)
            layout = known.get(str(buffer.name))
            size = layout.get_thread_size() if isinstance(layout, Fragment) else None
            spread = int(size.value) if isinstance(size, tirx.IntImm) else threads
            if first == 0 and spread <= count:
                continue  # every thread holding an element runs the operator
            message = (
                f"fragment {buffer.name} is used by {what} inside a condition that keeps only threads "
                f"[{first}, {first + count}) of the block (T.ws or an `if` on the thread index), but "
                f"it is laid out over threads [0, {spread}) of the {threads}-thread block: "
                f"the elements held by the other threads would never be computed"
            )
            hint = (
                f"run every operator on {buffer.name} (T.clear, T.gemm, T.copy, T.Parallel) with all "
                f"the block's threads, outside the T.ws / `if` (on sm_90a T.Pipelined specializes "
                f"warps for you), or launch the kernel with threads={count} so the threads that "
                f"use {buffer.name} are the whole block"
            )
            found.append(LayoutInferenceError(message, hint=hint, location=where))
            return tvm_ffi.VisitInterrupt(True)
        return None

    found: list[LayoutInferenceError] = []
    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_stmt), (tirx.For, on_stmt)], order="pre")
    if found:
        raise found[0]


def fragment_threads_of(func: Any) -> dict[str, tuple[int, int]]:
    """``FRAGMENT_THREADS`` of ``func``: fragment -> (first thread, threads)."""
    attrs = func.attrs
    if attrs is None or FRAGMENT_THREADS not in attrs:
        return {}
    return {str(k): (int(v[0]), int(v[1])) for k, v in attrs[FRAGMENT_THREADS].items()}
