"""Pass ``infer_layout``: choose a layout for every on-chip buffer (paper section 4.2).

Needs: normalized tile IR (tile ops as ``Evaluate`` calls, ``T.Parallel`` nests as
``For`` chains annotated ``tile.parallel``, the block's threads as ``threadIdx``
``thread_extent`` attributes). Optional: user layouts from ``T.annotate_layout`` in
the ``tile.annotated_layouts`` function attribute.

Guarantees: the function carries ``tile.layout_map`` (buffer name -> encoded
Layout/Fragment, see ``encode_layout``) with a fragment for every
``local.fragment`` buffer and a layout for every shared gemm operand; the outermost
loop of every parallel nest carries its thread-binding fragment
(``tile.loop_fragment``). The IR is otherwise unchanged.

Inference runs three priority levels, each to a fixpoint: (1) strict operators
(``T.gemm``: hardware fragments from ``Capabilities.mma_shapes``; shared operands
swizzled) and user annotations; (2) copies and reductions, which propagate what
level 1 fixed; (3) parallel loops: a nest takes the fragment of a buffer it indexes
with all its loop variables, and buffers it indexes with fewer variables get that
fragment projected and replicated (Figure 7). Only when nothing propagates any more
does level 3 pick a free default (row-major over the threads) for one undecided loop
or operator, and propagation resumes. A buffer required to have two different
layouts raises ``LayoutInferenceError`` naming the buffer, both operators and both
source lines. On targets without thread binding (the CPU) the block has one thread
and the result is the trivial one-thread fragments.

A fragment every use of which sits inside one condition keeping whole warps ``[a, b)`` of
the block (``with T.ws(g):``, ``if tx >= 128:``) is laid out over those ``b - a`` threads
(``FRAGMENT_THREADS``; ``lower_tile_ops`` and ``bind_parallel_loops`` then run its
operators with ``threadIdx.x - a`` as the thread), so a hand-written warp-specialized
gemm runs on the consumer's warps. An operator on a fragment inside such a condition that
the fragment's layout does not fit raises ``LayoutInferenceError``: the other threads'
elements would silently never be computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.layout import Fragment, Layout

from ..annotations import (
    ANNOTATED_LAYOUTS,
    LAYOUT_MAP,
    LOOP_FRAGMENT,
    USER_LOOP_LAYOUT,
    has_annotation,
)
from ..errors import LayoutInferenceError, SourceLocation, location_from_span
from ..ops import LowerContext, op_class_of
from ..ops.layout_rules import (
    LAYOUT_FREE,
    LAYOUT_STRICT,
    decode_layout,
    encode_layout,
    int_shape,
    is_fragment_buffer,
    linear_fragment,
    same_fragment,
)
from ._layout_items import (
    Nest,
    OpItem,
    check_given_loop_layout,
    collect_items,
    first_span,
    is_parallel,
    mentions_var,
    parallel_nest,
)
from ._thread_ranges import (
    FRAGMENT_THREADS,
    active_thread_range,
    check_thread_ranges,
    fragment_threads_of,
    item_fragments,
    thread_conditions,
    thread_ranges,
)
from ._traverse import WholeView, whole_views
from .pipeline import CompileContext, context_function_pass
from .properties import LAYOUTS_INFERRED, NORMALIZED, PARALLEL_NESTS, TILE_OPS

__all__ = [
    "FRAGMENT_THREADS",
    "INFER_LAYOUT",
    "active_thread_range",
    "block_threads",
    "decode_layout",
    "encode_layout",
    "first_span",
    "fragment_threads_of",
    "infer_layout",
    "is_parallel",
    "layout_map_of",
    "mentions_var",
    "parallel_nest",
]


def block_threads(func: Any, ctx: CompileContext) -> int:
    """The threads tile operators spread over: the constant extent of ``threadIdx.x`` (1 on the
    CPU, or without one). In a block of several thread dims (``threads=(32, 4)``) the operators
    run on ``threadIdx.x`` and every ``threadIdx.y``/``z`` group does the same work, as in
    TileLang, whose layout inference and operator lowering bind ``threadIdx.x`` alone."""
    if not ctx.capabilities.thread_binding:
        return 1
    extents: list[int] = []

    def on_attr(node: Any) -> None:
        is_x = str(node.attr_key) == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x"
        if is_x and isinstance(node.value, tirx.IntImm):
            extents.append(int(node.value.value))

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, on_attr))
    return extents[0] if extents else 1


class _Solver:
    def __init__(self, ctx: CompileContext, threads: int, views: Sequence[WholeView] = ()) -> None:
        self.ctx = ctx
        self.threads = threads
        self.item_threads: dict[int, int] = {}  # id(item) -> threads of its thread range
        self.ranges: dict[str, tuple[int, int]] = {}  # fragment -> (first thread, threads) using it
        self.known: dict[str, Layout] = {}
        self.source: dict[str, tuple[str, SourceLocation | None]] = {}
        # a fragment and its reshapes hold each element in the same place: a layout for one
        # is a layout for the others (name -> [(other name, other shape)])
        self.linked: dict[str, list[tuple[str, list[int]]]] = {}
        self.viewed: dict[str, WholeView] = {}
        for view in views:
            if not (is_fragment_buffer(view.root) and view.same_elements):
                continue
            names = [str(view.view.name), str(view.root.name)]
            shapes = [[int(d) for d in b.shape] for b in (view.view, view.root)]
            self.linked.setdefault(names[0], []).append((names[1], shapes[1]))
            self.linked.setdefault(names[1], []).append((names[0], shapes[0]))
            self.viewed[names[0]] = view

    def apply(self, proposals: Mapping[str, Layout], who: str, where: SourceLocation | None) -> bool:
        changed = False
        pending = [(name, layout, who) for name, layout in proposals.items()]
        while pending:
            name, layout, by = pending.pop(0)
            if name not in self.known:
                self.known[name] = layout
                self.source[name] = (by, where)
                changed = True
                if isinstance(layout, Fragment):
                    through = f"{by} (on {name}, through T.reshape)" if by == who else by
                    pending.extend(
                        (other, layout.reshape(shape), through) for other, shape in self.linked.get(name, [])
                    )
            elif not same_fragment(self.known[name], layout):
                self._conflict(name, layout, by, where)
        return changed

    def _conflict(self, name: str, layout: Layout, who: str, where: SourceLocation | None) -> None:
        first, first_at = self.source[name]

        def at(loc: SourceLocation | None) -> str:
            if loc is None:
                return "(unknown line)"
            text = f" `{loc.source_line.strip()}`" if loc.source_line else ""
            return f"{loc.filename}:{loc.line}{text}"

        message = (
            f"conflicting layouts for buffer {name}: {first} at {at(first_at)} requires\n"
            f"    {self.known[name]}\n"
            f"but {who} at {at(where)} requires\n    {layout}"
        )
        hint = (
            f"copy {name} into a new fragment with T.copy before the second use, "
            "so each operator gets the layout it needs"
        )
        view = self.viewed.get(name) or next(
            (v for v in self.viewed.values() if str(v.root.name) == name), None
        )
        if view is not None:
            view_name, base = str(view.view.name), str(view.root.name)
            message += (
                f"\n{view_name} is a T.reshape of the fragment {base}, a view of its registers: an "
                f"element of {view_name} must sit on the thread and in the register that hold it in "
                f"{base}, and these two uses place it on different threads"
            )
            hint = (
                f"T.copy {base} into a new fragment of shape {list(view.view.shape)} instead of "
                f"reshaping it (a copy may move elements between threads)"
            )
        raise LayoutInferenceError(message, hint=hint, location=where or first_at)

    def run_op(self, item: OpItem, level: int, free: bool) -> bool:
        if type(item.op).layout_level > level:
            return False
        lctx = LowerContext(
            target=self.ctx.target,
            capabilities=self.ctx.capabilities,
            threads=self.item_threads.get(id(item), self.threads),
            layouts=dict(self.known),
            location=item.location,
            level=level,
            free=free,
        )
        return self.apply(item.op.infer_layout(lctx), item.describe(), item.location)

    def run(self, items: list[OpItem | Nest], level: int, free: bool) -> bool:
        changed = False
        for item in items:
            if isinstance(item, Nest):
                if level < LAYOUT_FREE:
                    continue
                proposals = item.infer(self.known, self.item_threads.get(id(item), self.threads), free)
                changed |= self.apply(proposals, item.describe(), item.location)
            else:
                changed |= self.run_op(item, level, free)
            if free and changed:
                return True  # one free choice at a time, then propagate again
        return changed

    def fixpoint(self, items: list[OpItem | Nest], level: int) -> None:
        while self.run(items, level, free=False):
            pass


def replicated_fragment(shape: list[int], threads: int) -> Fragment:
    """Every element of ``shape`` on every one of ``threads`` threads (local = row-major index)."""
    if threads == 1:
        return linear_fragment(shape, 1)

    def index(*v: Any) -> Any:
        flat: Any = tirx.const(0, "int32")
        for var, extent in zip(v, shape, strict=True):
            flat = flat * extent + var
        return flat

    def thread(*args: Any) -> Any:
        return args[-1]  # the replica: one per thread

    return Fragment(shape, forward_thread_fn=thread, forward_index_fn=index, replicate=threads)


def _read_by_every_thread(func: Any) -> dict[str, tuple[Any, SourceLocation | None]]:
    """Fragments read, outside every ``T.Parallel`` nest and tile operator, where every thread
    needs the value: a condition, a loop bound, a named value (``Bind``), with a location.

    ``if mask[k]:`` in a serial loop (TileLang's block-sparse attention) is evaluated by
    every thread, so every thread must hold element ``k``; a fragment spread over the
    threads would hand each its own element instead. (A store or call reading an element
    there runs on the element's owner instead: ``bind_parallel_loops``.)
    """
    found: dict[str, tuple[Any, SourceLocation | None]] = {}

    def note_reads(expr: Any, at: SourceLocation | None) -> None:
        def on_load(load: Any) -> None:
            if is_fragment_buffer(load.source) and str(load.source.name) not in found:
                found[str(load.source.name)] = (load.source, at)

        tvm_ffi.structural_walk(expr, (ir.TensorLoad, on_load))

    def on_stmt(node: Any) -> Any:
        if isinstance(node, tirx.For) and is_parallel(node):
            return tvm_ffi.WalkResult.SKIP
        if isinstance(node, tirx.Evaluate) and op_class_of(node.value) is not None:
            return tvm_ffi.WalkResult.SKIP
        at = location_from_span(node.span)
        if isinstance(node, (tirx.IfThenElse, tirx.While)):
            note_reads(node.condition, at)
        elif isinstance(node, tirx.For):
            note_reads(node.min, at)
            note_reads(node.extent, at)
        elif isinstance(node, tirx.Bind):
            note_reads(node.value, at)
        elif isinstance(node, tirx.BufferStore) and str(node.buffer.scope()) == "local":
            note_reads(node.value, at)  # a named value every thread keeps in a register
        return None

    tvm_ffi.structural_walk(func.body, (tirx.Stmt, on_stmt), order="pre")
    return found


def _read_whole_in_parallel(func: Any, threads: int) -> dict[str, tuple[Any, SourceLocation | None]]:
    """Fragments read inside a ``T.Parallel`` nest of at least ``threads`` iterations at an
    index none of the nest's loop variables reach (``x[i] - row_max[0]`` over ``i``): every
    thread runs an iteration and reads that element, so every thread must hold it, as in
    TileLang, which replicates such a fragment (reducer_v2's online softmax). A smaller nest
    runs on some threads only: the operators' placement stands there."""
    found: dict[str, tuple[Any, SourceLocation | None]] = {}

    def on_nest(nest: Any) -> Any:
        if not (isinstance(nest, tirx.For) and is_parallel(nest)):
            return None
        loop_vars: list[Any] = []
        iterations = [1]

        def on_loop(loop: Any) -> None:
            if is_parallel(loop):
                loop_vars.append(loop.loop_var)
                extent = loop.extent
                iterations[0] *= int(extent.value) if isinstance(extent, tirx.IntImm) else 0

        tvm_ffi.structural_walk(nest, (tirx.For, on_loop))
        if iterations[0] < threads:
            return tvm_ffi.WalkResult.SKIP
        at = location_from_span(nest.span)

        def on_load(load: Any) -> None:
            name = str(load.source.name)
            reached = any(mentions_var(list(load.indices), var) for var in loop_vars)
            if is_fragment_buffer(load.source) and name not in found and not reached:
                found[name] = (load.source, at)

        tvm_ffi.structural_walk(nest.body, (ir.TensorLoad, on_load))
        return tvm_ffi.WalkResult.SKIP  # the nest's inner parallel loops were just walked

    tvm_ffi.structural_walk(func.body, (tirx.Stmt, on_nest), order="pre")
    return found


def _stored_by_every_thread(func: Any, items: list[OpItem | Nest]) -> set[str]:
    """Fragments every store of which is a plain statement that every thread of the block runs:
    outside ``T.Parallel`` nests, not an operand of a tile operator, not under a condition on
    the thread index (``rms[0] = 0``, then ``rms[0] += x[s, i]`` in a serial loop). Each thread
    then computes, and holds, the whole fragment, so a nest may read any element of it on any
    thread (TileLang's mHC kernels scale a 24-wide nest by such an ``rms[0]``)."""
    tx, _ = thread_conditions(func.body)
    everywhere: set[str] = set()
    elsewhere: set[str] = {n for item in items if isinstance(item, OpItem) for n in item_fragments(item)}

    def stores_into(stmt: Any, names: set[str]) -> None:
        def on_store(node: Any) -> None:
            if is_fragment_buffer(node.buffer):
                names.add(str(node.buffer.name))

        tvm_ffi.structural_walk(stmt, (tirx.BufferStore, on_store))

    def on_stmt(node: Any) -> Any:
        on_thread = (
            isinstance(node, tirx.IfThenElse) and tx is not None and mentions_var([node.condition], tx)
        )
        if on_thread or (isinstance(node, tirx.For) and is_parallel(node)):
            stores_into(node, elsewhere)
            return tvm_ffi.WalkResult.SKIP
        if isinstance(node, tirx.BufferStore) and is_fragment_buffer(node.buffer):
            everywhere.add(str(node.buffer.name))
        return None

    tvm_ffi.structural_walk(func.body, (tirx.Stmt, on_stmt), order="pre")
    return everywhere - elsewhere


def _annotated(func: Any) -> dict[str, Layout]:
    attrs = func.attrs
    if attrs is None or ANNOTATED_LAYOUTS not in attrs:
        return {}
    return {str(name): decode_layout(data) for name, data in attrs[ANNOTATED_LAYOUTS].items()}


def _free_rank(item: OpItem | Nest, known: Mapping[str, Layout]) -> int:
    """The highest rank among the fragment buffers ``item`` touches that have no layout yet."""
    if isinstance(item, Nest):
        buffers = [acc.buffer for acc in item.accesses]
    else:
        buffers = [region.buffer for region in item.op.regions()]
    ranks = [len(b.shape) for b in buffers if is_fragment_buffer(b) and str(b.name) not in known]
    return max(ranks, default=-1)


def solve(func: Any, ctx: CompileContext) -> tuple[dict[str, Layout], list[Nest], dict[str, tuple[int, int]]]:
    """The layout of every on-chip buffer of ``func``, its parallel nests (with fragments) and
    the fragments laid out over one thread range (``FRAGMENT_THREADS``)."""
    threads = block_threads(func, ctx)
    items, fragments = collect_items(func)
    solver = _Solver(ctx, threads, whole_views(func.body))
    solver.ranges, solver.item_threads = thread_ranges(func, threads, items)
    for item in items:
        if isinstance(item, Nest) and item.given:
            check_given_loop_layout(item, solver.item_threads.get(id(item), threads))
    where = location_from_span(getattr(func, "span", None))
    solver.apply(_annotated(func), "T.annotate_layout", where)
    for level in range(LAYOUT_STRICT, LAYOUT_FREE + 1):
        solver.fixpoint(items, level)
    # before any free choice: a fragment every thread reads whole (an operator that fixed
    # another layout for it is a conflict, reported with both lines)
    for name, (buffer, at) in _read_by_every_thread(func).items():
        shape = int_shape(list(buffer.shape))
        if shape is not None:
            who = "a read every thread makes outside T.Parallel (a condition, a loop bound, a named value)"
            solver.apply({name: replicated_fragment(shape, threads)}, who, at)
    # then those a T.Parallel nest reads at an index its loops do not reach, unless an
    # operator already placed them (bind_parallel_loops then checks that placement)
    for name, (buffer, at) in _read_whole_in_parallel(func, threads).items():
        shape = int_shape(list(buffer.shape))
        if shape is not None and name not in solver.known:
            who = "a read inside T.Parallel at an index the loop variables do not reach"
            solver.apply({name: replicated_fragment(shape, threads)}, who, at)
    # and those a smaller nest reads so that every thread of the block computed them whole
    computed_whole = _stored_by_every_thread(func, items)
    for name, (buffer, at) in _read_whole_in_parallel(func, 1).items():
        shape = int_shape(list(buffer.shape))
        if shape is not None and name in computed_whole and name not in solver.known:
            who = "statements every thread runs (outside T.Parallel), read inside T.Parallel"
            solver.apply({name: replicated_fragment(shape, threads)}, who, at)

    # Free choices go to the undecided fragments of highest rank first, and among those to
    # the T.Parallel computations before the operators that only move or fill a tile;
    # program order breaks ties. A 2-D tile's binding decides its 1-D row statistics through
    # reductions and broadcasts (a statistic bound first, by an early T.fill or T.copy of it,
    # fixes a binding the tile's reduction then contradicts), and the loop that dequantizes
    # a packed tile decides the packed tile's binding, which its load then follows.
    def free_order(item: OpItem | Nest) -> tuple[int, int]:
        return -_free_rank(item, solver.known), 0 if isinstance(item, Nest) else 1

    while solver.run(sorted(items, key=free_order), LAYOUT_FREE, free=True):
        solver.fixpoint(items, LAYOUT_FREE)
    for buffer in fragments:
        shape = int_shape(list(buffer.shape))
        if str(buffer.name) not in solver.known and shape is not None:
            solver.apply({str(buffer.name): linear_fragment(shape, threads)}, "the default binding", None)
    return solver.known, [item for item in items if isinstance(item, Nest)], solver.ranges


def _infer_func(func: Any, ctx: CompileContext) -> Any:
    """Infer and record buffer and loop layouts for every function (see module docstring)."""
    known, nests, ranges = solve(func, ctx)
    check_thread_ranges(func, block_threads(func, ctx), known, ranges)
    fragments = {nest.loops[0].__chandle__(): nest.fragment for nest in nests if nest.fragment is not None}
    given = any(has_annotation(nest.loops[0], USER_LOOP_LAYOUT) for nest in nests)  # to strip
    if fragments or given:

        def on_for(loop: Any, m: Any) -> Any:
            frag = fragments.get(loop.__chandle__())
            if frag is None and not has_annotation(loop, USER_LOOP_LAYOUT):
                return m.default_mutate(loop)
            notes = {str(k): v for k, v in loop.annotations.items() if str(k) != USER_LOOP_LAYOUT}
            if frag is not None:
                notes[LOOP_FRAGMENT] = encode_layout(frag)
            return tirx.For(
                loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, None, notes, span=loop.span
            )

        func = func.with_body(tvm_ffi.structural_mutate(func.body, (tirx.For, on_for)))
    func = func.with_attr(LAYOUT_MAP, {name: encode_layout(layout) for name, layout in known.items()})
    if ranges:
        func = func.with_attr(FRAGMENT_THREADS, {name: list(r) for name, r in ranges.items()})
    return func


def layout_map_of(func: Any) -> dict[str, Layout]:
    """The layouts ``infer_layout`` recorded on ``func`` (empty before the pass)."""
    attrs = func.attrs
    if attrs is None or LAYOUT_MAP not in attrs:
        return {}
    return {str(name): decode_layout(data) for name, data in attrs[LAYOUT_MAP].items()}


INFER_LAYOUT = context_function_pass(
    _infer_func, name="infer_layout", needs={NORMALIZED, TILE_OPS, PARALLEL_NESTS},
    guarantees={LAYOUTS_INFERRED})  # fmt: skip
infer_layout = INFER_LAYOUT.run
