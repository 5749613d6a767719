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

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.layout import Fragment, Layout

from ..annotations import (
    ANNOTATED_LAYOUTS,
    LAYOUT_MAP,
    LOOP_FRAGMENT,
    PARALLEL_LOOP,
    USER_LOOP_LAYOUT,
    has_annotation,
)
from ..errors import LayoutInferenceError, SourceLocation, location_from_span
from ..ops import LowerContext, TileOp, decode, op_class_of
from ..ops.layout_rules import (
    LAYOUT_FREE,
    LAYOUT_STRICT,
    decode_layout,
    encode_layout,
    fragment_through,
    int_shape,
    is_fragment_buffer,
    linear_fragment,
    project_fragment,
    same_fragment,
)
from ._thread_values import thread_values
from ._traverse import WholeView, whole_views
from .pipeline import CompileContext, context_function_pass
from .properties import LAYOUTS_INFERRED, NORMALIZED, PARALLEL_NESTS, TILE_OPS

__all__ = [
    "INFER_LAYOUT",
    "active_thread_range",
    "decode_layout",
    "encode_layout",
    "infer_layout",
    "layout_map_of",
    "mentions_var",
]


def is_parallel(loop: Any) -> bool:
    return has_annotation(loop, PARALLEL_LOOP)


def parallel_nest(loop: Any) -> list[Any]:
    """The chain of directly nested ``T.Parallel`` loops starting at ``loop``."""
    nest = [loop]
    while isinstance(nest[-1].body, tirx.For) and is_parallel(nest[-1].body):
        nest.append(nest[-1].body)
    return nest


def block_threads(func: Any, ctx: CompileContext) -> int:
    """Threads per block: the product of the constant ``threadIdx`` extents (1 on the CPU)."""
    if not ctx.capabilities.thread_binding:
        return 1
    extents: list[int] = []

    def on_attr(node: Any) -> None:
        is_thread = str(node.attr_key) == "thread_extent" and str(node.node.thread_tag).startswith(
            "threadIdx"
        )
        if is_thread and isinstance(node.value, tirx.IntImm):
            extents.append(int(node.value.value))

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, on_attr))
    return math.prod(extents) if extents else 1


@dataclasses.dataclass
class _Access:
    buffer: Any
    dims: list[int] | None  # loop dim of each buffer index, None when not a plain loop var
    divs: list[int] | None = None  # index k is ``loop var // divs[k]`` (None: all plain vars)
    # buffer indices that are the variables of loops inside the nest (``src[i, k]`` under
    # ``for k in T.serial(K)``): those dims stay on the iteration's thread; ``dims`` then
    # lists the loop dims of the other indices only
    local: list[int] | None = None


@dataclasses.dataclass
class _Nest:
    """A ``T.Parallel`` nest seen as an operator of level 3."""

    loops: list[Any]
    extents: list[int]
    accesses: list[_Access]
    location: SourceLocation | None
    fragment: Any = None
    given: bool = False  # the fragment is the program's (T.Parallel(..., loop_layout=))

    def describe(self) -> str:
        names = ", ".join(str(loop.loop_var) for loop in self.loops)
        return f"T.Parallel loop over ({names})"

    def infer(self, known: Mapping[str, Layout], threads: int, free: bool) -> dict[str, Layout]:
        if self.fragment is None:
            for acc in self.accesses:
                layout = known.get(str(acc.buffer.name))
                full = (acc.dims is not None and len(acc.dims) == len(self.extents) and acc.divs is None
                        and acc.local is None)
                if full and isinstance(layout, Fragment) and acc.dims is not None and self._covers(acc):
                    self.fragment = fragment_through(layout, self.extents, acc.dims)
                    break
        if self.fragment is None and len(self.extents) == 2:
            self.fragment = self._from_row_statistic(known, threads)
        if self.fragment is None and free:
            self.fragment = linear_fragment(self.extents, threads)
        if self.fragment is None:
            return {}
        out: dict[str, Layout] = {}
        for acc in self.accesses:
            if acc.dims is None or not self._covers(acc):
                continue
            if acc.divs is not None:
                layout = project_fragment(self.fragment, self.extents, acc.dims, acc.divs)
            elif len(acc.dims) == len(self.extents):
                inverse = [acc.dims.index(d) for d in range(len(self.extents))]
                shape = [self.extents[d] for d in acc.dims]
                layout = fragment_through(self.fragment, shape, inverse)
            else:
                layout = project_fragment(self.fragment, self.extents, acc.dims)
            if acc.local is not None:
                layout = _with_local_dims(layout, int_shape(list(acc.buffer.shape)) or [], acc.local)
            out[str(acc.buffer.name)] = layout
        return out

    def _from_row_statistic(self, known: Mapping[str, Layout], threads: int) -> Fragment | None:
        """A 2-D nest that reads a known 1-D fragment held by ``R`` threads per element
        (a row statistic, ``acc_o[i, j] *= scale[i]``): row ``i`` on the statistic's threads,
        column ``j`` on replica ``j % R``, so the nest and the statistic agree. With ``R = 1``
        (a statistic reduced from a tile whose rows sit on one thread each) the whole row is
        on that thread: no other binding of the nest agrees with the statistic, so the free
        default of a tile it has not met yet must not be chosen instead."""
        for acc in self.accesses:
            layout = known.get(str(acc.buffer.name))
            if (not isinstance(layout, Fragment) or acc.dims is None or len(acc.dims) != 1 or acc.divs
                    or acc.local is not None):
                continue
            reps = layout.replicate_size
            row = acc.dims[0]
            col = 1 - row
            if (reps <= 1 and threads <= 1) or not self._covers(acc) or self.extents[col] % reps:
                continue
            per_row = self.extents[col] // reps
            stat = layout

            def thread(*v: Any, stat: Fragment = stat, row: int = row, col: int = col,
                       reps: int = reps) -> Any:
                if reps == 1:
                    return stat.map_forward_thread([v[row]])
                return stat.map_forward_thread([v[row]], tirx.floormod(v[col], reps))

            def index(*v: Any, stat: Fragment = stat, row: int = row, col: int = col, reps: int = reps,
                      per_row: int = per_row) -> Any:
                local = stat.map_forward_index([v[row]])[0]
                return [local * per_row + tirx.floordiv(v[col], reps)]

            return Fragment(list(self.extents), forward_thread_fn=thread, forward_index_fn=index)
        return None

    def _covers(self, acc: _Access) -> bool:
        shape = int_shape(list(acc.buffer.shape))
        if acc.dims is None or shape is None:
            return False
        if acc.local is not None:
            shape = [n for k, n in enumerate(shape) if k not in acc.local]
        divs = acc.divs or [1] * len(acc.dims)
        return shape == [self.extents[d] // c for d, c in zip(acc.dims, divs, strict=True)]


@dataclasses.dataclass
class _OpItem:
    op: TileOp
    location: SourceLocation | None
    key: Any = None  # the Evaluate statement's __chandle__

    def describe(self) -> str:
        return "T." + self.op.op_name.split(".", 1)[1]


def first_span(stmt: Any) -> SourceLocation | None:
    found: list[SourceLocation] = []

    def visit(node: Any) -> Any:
        where = location_from_span(getattr(node, "span", None))
        if where is not None:
            found.append(where)
            return tvm_ffi.VisitInterrupt(True)
        return None

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, visit), (tirx.For, visit)], order="pre")
    return found[0] if found else None


def _nest_item(loops: list[Any]) -> _Nest | None:
    extents = [int(loop.extent.value) if isinstance(loop.extent, tirx.IntImm) else None for loop in loops]
    if any(e is None for e in extents):
        return None
    loop_vars = [loop.loop_var for loop in loops]
    accesses: list[_Access] = []
    inner: list[Any] = []  # variables of the serial (unrolled, vectorized) loops inside the nest

    def on_inner(loop: Any) -> None:
        if not is_parallel(loop) and isinstance(loop.min, tirx.IntImm) and int(loop.min.value) == 0:
            inner.append(loop.loop_var)

    tvm_ffi.structural_walk(loops[-1].body, (tirx.For, on_inner))

    def record(buffer: Any, indices: Any) -> None:
        if not is_fragment_buffer(buffer):
            return
        dims: list[int] | None = []
        divs: list[int] = []
        local: list[int] = []
        seen: list[Any] = []
        for k, index in enumerate(indices):
            if isinstance(index, ir.Var) and any(index.same_as(v) for v in inner):
                if any(index.same_as(v) for v in seen):
                    dims = None
                    break
                seen.append(index)
                local.append(k)
                continue
            var, div = index, 1
            if isinstance(index, tirx.FloorDiv) and isinstance(index.b, tirx.IntImm):
                var, div = index.a, int(index.b.value)  # a packed operand: B[i, j // 2]
            hit = [d for d, v in enumerate(loop_vars) if isinstance(var, ir.Var) and var.same_as(v)]
            if not hit or dims is None or hit[0] in dims or div < 1 or (extents[hit[0]] or 1) % div:
                dims = None
                break
            dims.append(hit[0])
            divs.append(div)
        packed = any(c > 1 for c in divs)
        if local and (packed or dims is None or not dims):
            dims = None  # an inner loop's index beside a packed one, or with no nest index
        accesses.append(_Access(buffer, dims, divs if packed else None, local or None))

    tvm_ffi.structural_walk(
        loops[-1].body,
        [
            (tirx.BufferStore, lambda s: record(s.buffer, s.indices)),
            (ir.TensorLoad, lambda e: record(e.source, e.indices)),
        ],
    )
    where = location_from_span(loops[0].span) or first_span(loops[0])
    nest = _Nest(loops, [int(e) for e in extents if e is not None], accesses, where)
    if has_annotation(loops[0], USER_LOOP_LAYOUT):
        given = decode_layout(loops[0].annotations[USER_LOOP_LAYOUT])
        nest.fragment = given if isinstance(given, Fragment) else None
        nest.given = True
    return nest


def _check_given_loop_layout(nest: _Nest, threads: int) -> None:
    """A ``T.Parallel(..., loop_layout=frag)`` binding: used where the block has threads and it
    fits them; on a one-thread block (the CPU) every iteration runs on that thread anyway."""
    frag = nest.fragment
    if threads <= 1 or frag is None:
        nest.fragment, nest.given = None, False
        return
    size = frag.get_thread_size()
    spread = int(size.value) if isinstance(size, tirx.IntImm) else None
    if spread is None or spread > threads:
        raise LayoutInferenceError(
            f"the loop_layout of the {nest.describe()} puts iterations on {spread or 'a symbolic number of'} "
            f"threads, but the block has {threads}",
            hint=f"write the fragment's thread as a function with values below {threads}, "
            "or launch the kernel with more threads",
            location=nest.location,
        )


def _with_local_dims(nested: Fragment, shape: Sequence[int], local: Sequence[int]) -> Fragment:
    """A fragment over ``shape`` whose dims ``local`` are indexed by loops inside a nest.

    ``nested`` lays out the other dims (the nest's iteration). All the elements along the
    local dims sit on the thread(s) of their nest iteration, as consecutive registers: the
    iteration's serial loop reads them all (``src[i, k]`` for ``k`` in ``T.serial(K)``).
    """
    kept = [k for k in range(len(shape)) if k not in local]
    reps = nested.replicate_size
    registers = int_shape(list(nested.get_output_shape())) or []

    def thread(*args: Any) -> Any:
        v = args[: len(shape)]
        rep = args[len(shape)] if reps > 1 else 0
        return nested.map_forward_thread([v[k] for k in kept], rep)

    def index(*v: Any) -> Any:
        flat: Any = tirx.const(0, "int32")
        for e, n in zip(nested.map_forward_index([v[k] for k in kept]), registers, strict=True):
            flat = flat * n + e
        for k in local:
            flat = flat * shape[k] + v[k]
        return [flat]

    return Fragment(list(shape), forward_thread_fn=thread, forward_index_fn=index, replicate=reps)


def _collect(func: Any) -> tuple[list[_OpItem | _Nest], list[Any]]:
    items: list[_OpItem | _Nest] = []
    fragments: list[Any] = []
    inside: set[Any] = set()

    def on_stmt(node: Any) -> Any:
        if isinstance(node, tirx.AllocBuffer) and is_fragment_buffer(node.buffer):
            fragments.append(node.buffer)
        elif isinstance(node, tirx.Evaluate) and op_class_of(node.value) is not None:
            op = decode(node.value)
            op.span = node.span if op.span is None else op.span
            items.append(_OpItem(op, location_from_span(node.span) or op.location, node.__chandle__()))
        elif isinstance(node, tirx.For) and is_parallel(node) and node not in inside:
            nest = parallel_nest(node)
            inside.update(nest)
            item = _nest_item(nest)
            if item is not None:
                items.append(item)
        return None

    tvm_ffi.structural_walk(
        func.body, [(tirx.AllocBuffer, on_stmt), (tirx.Evaluate, on_stmt), (tirx.For, on_stmt)], order="pre"
    )
    return items, fragments


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

    def run_op(self, item: _OpItem, level: int, free: bool) -> bool:
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

    def run(self, items: list[_OpItem | _Nest], level: int, free: bool) -> bool:
        changed = False
        for item in items:
            if isinstance(item, _Nest):
                if level < LAYOUT_FREE:
                    continue
                proposals = item.infer(self.known, self.item_threads.get(id(item), self.threads), free)
                changed |= self.apply(proposals, item.describe(), item.location)
            else:
                changed |= self.run_op(item, level, free)
            if free and changed:
                return True  # one free choice at a time, then propagate again
        return changed

    def fixpoint(self, items: list[_OpItem | _Nest], level: int) -> None:
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


def _annotated(func: Any) -> dict[str, Layout]:
    attrs = func.attrs
    if attrs is None or ANNOTATED_LAYOUTS not in attrs:
        return {}
    return {str(name): decode_layout(data) for name, data in attrs[ANNOTATED_LAYOUTS].items()}


def _free_rank(item: _OpItem | _Nest, known: Mapping[str, Layout]) -> int:
    """The highest rank among the fragment buffers ``item`` touches that have no layout yet."""
    if isinstance(item, _Nest):
        buffers = [acc.buffer for acc in item.accesses]
    else:
        buffers = [region.buffer for region in item.op.regions()]
    ranks = [len(b.shape) for b in buffers if is_fragment_buffer(b) and str(b.name) not in known]
    return max(ranks, default=-1)


def solve(
    func: Any, ctx: CompileContext
) -> tuple[dict[str, Layout], list[_Nest], dict[str, tuple[int, int]]]:
    """The layout of every on-chip buffer of ``func``, its parallel nests (with fragments) and
    the fragments laid out over one thread range (``FRAGMENT_THREADS``)."""
    threads = block_threads(func, ctx)
    items, fragments = _collect(func)
    solver = _Solver(ctx, threads, whole_views(func.body))
    solver.ranges, solver.item_threads = _thread_ranges(func, threads, items)
    for item in items:
        if isinstance(item, _Nest) and item.given:
            _check_given_loop_layout(item, solver.item_threads.get(id(item), threads))
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

    # Free choices go to the undecided fragments of highest rank first, and among those to
    # the T.Parallel computations before the operators that only move or fill a tile;
    # program order breaks ties. A 2-D tile's binding decides its 1-D row statistics through
    # reductions and broadcasts (a statistic bound first, by an early T.fill or T.copy of it,
    # fixes a binding the tile's reduction then contradicts), and the loop that dequantizes
    # a packed tile decides the packed tile's binding, which its load then follows.
    def free_order(item: _OpItem | _Nest) -> tuple[int, int]:
        return -_free_rank(item, solver.known), 0 if isinstance(item, _Nest) else 1

    while solver.run(sorted(items, key=free_order), LAYOUT_FREE, free=True):
        solver.fixpoint(items, LAYOUT_FREE)
    for buffer in fragments:
        shape = int_shape(list(buffer.shape))
        if str(buffer.name) not in solver.known and shape is not None:
            solver.apply({str(buffer.name): linear_fragment(shape, threads)}, "the default binding", None)
    return solver.known, [item for item in items if isinstance(item, _Nest)], solver.ranges


def mentions_var(exprs: Any, var: Any) -> bool:
    """Whether any of ``exprs`` uses ``var``."""
    found = [False]

    def visit(v: Any) -> None:
        found[0] = found[0] or v.same_as(var)

    for e in exprs:
        tvm_ffi.structural_walk(e, (ir.Var, visit))
    return found[0]


def _passing_threads(cond: Any, thread_var: Any, threads: int, analyzer: Any) -> list[int] | None:
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
        passing = _passing_threads(joined, thread_var, threads, analyzer)
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


def _thread_conditions(body: Any) -> tuple[Any, dict[Any, list[Any]]]:
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


def _item_fragments(item: _OpItem | _Nest) -> list[str]:
    if isinstance(item, _Nest):
        buffers = [acc.buffer for acc in item.accesses]
    else:
        buffers = [region.buffer for region in item.op.regions()]
    return sorted({str(b.name) for b in buffers if is_fragment_buffer(b)})


def _thread_ranges(
    func: Any, threads: int, items: list[_OpItem | _Nest]
) -> tuple[dict[str, tuple[int, int]], dict[int, int]]:
    """Fragments used only inside one warp-aligned thread range (``T.ws(g)``), with the range,
    and the thread count of each item on such fragments (keyed by ``id``)."""
    if threads <= 1:
        return {}, {}
    tx, enclosing = _thread_conditions(func.body)
    if tx is None or not enclosing:
        return {}, {}
    item_range: dict[int, tuple[int, int] | None] = {}
    uses: dict[str, set[tuple[int, int] | None]] = {}
    for item in items:
        key = item.loops[0].__chandle__() if isinstance(item, _Nest) else item.key
        active = active_thread_range(enclosing.get(key, []), tx, threads)
        if active is not None and (active[0] % 32 or active[1] % 32):
            active = None  # not whole warps: the gemm's warps could not be the range's
        item_range[id(item)] = active
        for name in _item_fragments(item):
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
            names = _item_fragments(item)
            if any(n in ranges for n in names) and not all(
                ranges.get(n) == item_range[id(item)] for n in names
            ):
                for n in names:
                    changed |= ranges.pop(n, None) is not None
    counts = {
        id(item): ranges[names[0]][1]
        for item in items
        if (names := _item_fragments(item)) and names[0] in ranges
    }
    return ranges, counts


def _check_thread_ranges(
    func: Any, threads: int, known: Mapping[str, Layout], ranges: Mapping[str, tuple[int, int]]
) -> None:
    """A tile operator or ``T.Parallel`` nest on a fragment runs, inside a condition that keeps
    only threads ``[a, b)`` of the block (``T.ws(g)``, ``if tx < 128:``), on those threads alone,
    while the fragment is spread over every thread of the block: the elements the other threads
    hold would never be computed. Raise instead of returning a silently wrong result."""
    if threads <= 1:
        return
    tx, enclosing = _thread_conditions(func.body)
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


def _infer_func(func: Any, ctx: CompileContext) -> Any:
    """Infer and record buffer and loop layouts for every function (see module docstring)."""
    known, nests, ranges = solve(func, ctx)
    _check_thread_ranges(func, block_threads(func, ctx), known, ranges)
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


def fragment_threads_of(func: Any) -> dict[str, tuple[int, int]]:
    """``FRAGMENT_THREADS`` of ``func``: fragment -> (first thread, threads)."""
    attrs = func.attrs
    if attrs is None or FRAGMENT_THREADS not in attrs:
        return {}
    return {str(k): (int(v[0]), int(v[1])) for k, v in attrs[FRAGMENT_THREADS].items()}


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
