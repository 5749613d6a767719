"""The items layout inference solves over: tile operators and ``T.Parallel`` nests.

A ``T.Parallel`` nest is an operator of level 3 (:class:`Nest`): which fragments it indexes
with which of its loop variables (:class:`Access`), the fragment that binds it to threads
(inferred, or the program's ``loop_layout=``), and the layouts that fragment gives the buffers
it indexes. :func:`collect_items` walks a function for the solver of
:mod:`~tile.ir.transform.infer_layout`.
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

from ..annotations import PARALLEL_LOOP, USER_LOOP_LAYOUT, has_annotation
from ..errors import LayoutInferenceError, SourceLocation, location_from_span
from ..ops import TileOp, decode, op_class_of
from ..ops.layout_rules import (
    decode_layout,
    fragment_through,
    int_shape,
    is_fragment_buffer,
    linear_fragment,
    project_fragment,
)


def reshaped(frag: Fragment, shape: Sequence[int], to_shape: Sequence[int]) -> Fragment:
    """The fragment over ``to_shape`` whose point ``q`` is ``frag``'s point of ``shape`` at the
    same row-major position (a reshape: both hold the same number of elements)."""
    rep_count = frag.replicate_size

    def point(q: Sequence[Any]) -> list[Any]:
        flat: Any = tirx.const(0, "int32")
        for index, extent in zip(q, to_shape, strict=True):
            flat = flat * extent + index
        out: list[Any] = []
        for extent in reversed(shape):
            out.insert(0, tirx.floormod(flat, extent))
            flat = tirx.floordiv(flat, extent)
        return out

    def thread(*args: Any) -> Any:
        rep = args[len(to_shape)] if rep_count > 1 else 0
        return frag.map_forward_thread(point(args[: len(to_shape)]), rep)

    def index(*q: Any) -> Any:
        return frag.map_forward_index(point(q))

    return Fragment(list(to_shape), forward_thread_fn=thread, forward_index_fn=index, replicate=rep_count)


def squeezed_fragment(layout: Fragment, shape: Sequence[int], units: Sequence[int]) -> Fragment:
    """``layout`` over ``shape`` seen without its unit dims ``units`` (their index is 0)."""
    rest = [n for k, n in enumerate(shape) if k not in units]
    rep_count = layout.replicate_size

    def full(v: Sequence[Any]) -> list[Any]:
        it = iter(v)
        return [tirx.const(0, "int32") if k in units else next(it) for k in range(len(shape))]

    def thread(*args: Any) -> Any:
        rep = args[len(rest)] if rep_count > 1 else 0
        return layout.map_forward_thread(full(args[: len(rest)]), rep)

    def index(*v: Any) -> Any:
        return layout.map_forward_index(full(v))

    return Fragment(rest, forward_thread_fn=thread, forward_index_fn=index, replicate=rep_count)


def _unsqueezed(frag: Fragment, shape: Sequence[int], units: Sequence[int]) -> Fragment:
    """``frag`` (over ``shape`` without the unit dims ``units``) as a fragment over ``shape``."""
    rep_count = frag.replicate_size

    def rest(q: Sequence[Any]) -> list[Any]:
        return [x for k, x in enumerate(q) if k not in units]

    def thread(*args: Any) -> Any:
        rep = args[len(shape)] if rep_count > 1 else 0
        return frag.map_forward_thread(rest(args[: len(shape)]), rep)

    def index(*q: Any) -> Any:
        return frag.map_forward_index(rest(q))

    return Fragment(list(shape), forward_thread_fn=thread, forward_index_fn=index, replicate=rep_count)


def is_parallel(loop: Any) -> bool:
    return has_annotation(loop, PARALLEL_LOOP)


def parallel_nest(loop: Any) -> list[Any]:
    """The chain of directly nested ``T.Parallel`` loops starting at ``loop``."""
    nest = [loop]
    while isinstance(nest[-1].body, tirx.For) and is_parallel(nest[-1].body):
        nest.append(nest[-1].body)
    return nest


@dataclasses.dataclass
class Access:
    buffer: Any
    dims: list[int] | None  # loop dim of each buffer index, None when not a plain loop var
    divs: list[int] | None = None  # index k is ``loop var // divs[k]`` (None: all plain vars)
    # buffer indices that are the variables of loops inside the nest (``src[i, k]`` under
    # ``for k in T.serial(K)``): those dims stay on the iteration's thread; ``dims`` then
    # lists the loop dims of the other indices only
    local: list[int] | None = None
    # the buffer is the nest's domain reshaped: its row-major position equals the nest's
    # (``B_local[i * N + j]`` in ``T.Parallel(M, N)`` over an ``(M * N,)`` fragment)
    reshape: bool = False
    # buffer dims of extent 1 indexed by the constant 0 (``A_local[0, i]`` of a (1, N) fragment
    # in a copy over (N)): the other indices are ``dims``; these take no part in the placement
    units: list[int] | None = None
    # every index is a distinct loop variable plus an offset free of the nest's variables
    # (``acc[i + s * 16, j]`` in a loop over ``s``): the loop dim of each index, else None
    shifted: list[int] | None = None


@dataclasses.dataclass
class Nest:
    """A ``T.Parallel`` nest seen as an operator of level 3."""

    loops: list[Any]
    extents: list[int]
    accesses: list[Access]
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
                full = (
                    acc.dims is not None
                    and len(acc.dims) == len(self.extents)
                    and acc.divs is None
                    and acc.local is None
                    and not acc.units
                )
                if full and isinstance(layout, Fragment) and acc.dims is not None and self._covers(acc):
                    self.fragment = fragment_through(layout, self.extents, acc.dims)
                    break
                if (
                    acc.units
                    and isinstance(layout, Fragment)
                    and acc.dims is not None
                    and len(acc.dims) == len(self.extents)
                    and self._covers(acc)
                ):
                    shape = int_shape(list(acc.buffer.shape)) or []
                    squeezed = squeezed_fragment(layout, shape, acc.units)
                    self.fragment = fragment_through(squeezed, self.extents, acc.dims)
                    break
                if acc.reshape and isinstance(layout, Fragment):
                    self.fragment = reshaped(layout, int_shape(list(acc.buffer.shape)) or [], self.extents)
                    break
        if self.fragment is None:
            self.fragment = self._from_shifted(known)
        if self.fragment is None and len(self.extents) == 2:
            self.fragment = self._from_row_statistic(known, threads)
        if self.fragment is None and free:
            self.fragment = linear_fragment(self.extents, threads)
        if self.fragment is None:
            return {}
        out: dict[str, Layout] = {}
        for acc in self.accesses:
            if acc.reshape:
                to_shape = int_shape(list(acc.buffer.shape)) or []
                out[str(acc.buffer.name)] = reshaped(self.fragment, self.extents, to_shape)
                continue
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
                layout = with_local_dims(layout, int_shape(list(acc.buffer.shape)) or [], acc.local)
            if acc.units:
                layout = _unsqueezed(layout, int_shape(list(acc.buffer.shape)) or [], acc.units)
            out[str(acc.buffer.name)] = layout
        return out

    def _from_shifted(self, known: Mapping[str, Layout]) -> Fragment | None:
        """The layout of a fragment of the nest's shape read at shifted indices (``acc[i + s * 16,
        j]`` over ``T.Parallel(32, n)`` under ``if i < 16``, storing half of the accumulator per
        step of ``s``), as if it were read at the loop variables: the iteration runs where the
        unshifted element is. Whether the shifted element is on that thread too is checked
        point by point when the nest is bound (``bind_parallel_loops``); an mma accumulator's
        rows 16 apart are."""
        for acc in self.accesses:
            layout = known.get(str(acc.buffer.name))
            dims = acc.shifted
            if dims is None or not isinstance(layout, Fragment) or len(dims) != len(self.extents):
                continue
            if int_shape(list(acc.buffer.shape)) != [self.extents[d] for d in dims]:
                continue
            return fragment_through(layout, self.extents, dims)
        return None

    def _from_row_statistic(self, known: Mapping[str, Layout], threads: int) -> Fragment | None:
        """A 2-D nest that reads a known 1-D fragment held by ``R`` threads per element
        (a row statistic, ``acc_o[i, j] *= scale[i]``): row ``i`` on the statistic's threads,
        column ``j`` on replica ``j % R``, so the nest and the statistic agree. With ``R = 1``
        (a statistic reduced from a tile whose rows sit on one thread each) the whole row is
        on that thread: no other binding of the nest agrees with the statistic, so the free
        default of a tile it has not met yet must not be chosen instead."""
        for acc in self.accesses:
            layout = known.get(str(acc.buffer.name))
            if (
                not isinstance(layout, Fragment)
                or acc.dims is None
                or len(acc.dims) != 1
                or acc.divs
                or acc.local is not None
            ):
                continue
            reps = layout.replicate_size
            row = acc.dims[0]
            col = 1 - row
            if (reps <= 1 and threads <= 1) or not self._covers(acc) or self.extents[col] % reps:
                continue
            per_row = self.extents[col] // reps
            stat = layout

            def thread(
                *v: Any, stat: Fragment = stat, row: int = row, col: int = col, reps: int = reps
            ) -> Any:
                if reps == 1:
                    return stat.map_forward_thread([v[row]])
                return stat.map_forward_thread([v[row]], tirx.floormod(v[col], reps))

            def index(
                *v: Any,
                stat: Fragment = stat,
                row: int = row,
                col: int = col,
                reps: int = reps,
                per_row: int = per_row,
            ) -> Any:
                local = stat.map_forward_index([v[row]])[0]
                return [local * per_row + tirx.floordiv(v[col], reps)]

            return Fragment(list(self.extents), forward_thread_fn=thread, forward_index_fn=index)
        return None

    def _covers(self, acc: Access) -> bool:
        shape = int_shape(list(acc.buffer.shape))
        if acc.dims is None or shape is None:
            return False
        if acc.local is not None:
            shape = [n for k, n in enumerate(shape) if k not in acc.local]
        if acc.units:
            shape = [n for k, n in enumerate(shape) if k not in acc.units]
        divs = acc.divs or [1] * len(acc.dims)
        return shape == [self.extents[d] // c for d, c in zip(acc.dims, divs, strict=True)]


@dataclasses.dataclass
class OpItem:
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


def _is_reshape(buffer: Any, indices: Any, loop_vars: Sequence[Any], extents: Sequence[int | None]) -> bool:
    """Whether ``buffer[indices]`` is the nest's point at the same row-major position, every
    element once: the buffer holds as many elements as the nest runs iterations."""
    shape = int_shape(list(buffer.shape))
    sizes = [e for e in extents if e is not None]
    if shape is None or len(sizes) != len(extents) or math.prod(shape) != math.prod(sizes):
        return False
    flat_buffer: Any = tirx.const(0, "int32")
    for index, dim in zip(indices, shape, strict=True):
        flat_buffer = flat_buffer * dim + index
    flat_nest: Any = tirx.const(0, "int32")
    for var, size in zip(loop_vars, sizes, strict=True):
        flat_nest = flat_nest * size + var
    analyzer = tvm.sym.Analyzer()
    for var, size in zip(loop_vars, sizes, strict=True):
        analyzer.bind(var, ir.Range(0, size))
    return bool(analyzer.can_prove(flat_buffer == flat_nest))


def _shift_dims(indices: Any, loop_vars: Sequence[Any]) -> list[int] | None:
    """The loop dim of each index when every index is ``loop var + offset`` (the offset reads
    no loop variable of the nest; each variable once; a plain variable is an offset of 0) and
    one of them has an offset, else None."""
    if all(isinstance(index, ir.Var) for index in indices):
        return None

    def dim_of(var: Any) -> int | None:
        hit = [d for d, v in enumerate(loop_vars) if isinstance(var, ir.Var) and var.same_as(v)]
        return hit[0] if hit else None

    dims: list[int] = []
    for index in indices:
        found = dim_of(index)
        if found is None and isinstance(index, tirx.Add):
            for var, offset in ((index.a, index.b), (index.b, index.a)):
                if dim_of(var) is not None and not any(mentions_var([offset], v) for v in loop_vars):
                    found = dim_of(var)
                    break
        if found is None or found in dims:
            return None
        dims.append(found)
    return dims


def mentions_var(exprs: Any, var: Any) -> bool:
    """Whether any of ``exprs`` uses ``var``."""
    found = [False]

    def visit(v: Any) -> None:
        found[0] = found[0] or v.same_as(var)

    for e in exprs:
        tvm_ffi.structural_walk(e, (ir.Var, visit))
    return found[0]


def nest_item(loops: list[Any]) -> Nest | None:
    extents = [int(loop.extent.value) if isinstance(loop.extent, tirx.IntImm) else None for loop in loops]
    if any(e is None for e in extents):
        return None
    loop_vars = [loop.loop_var for loop in loops]
    accesses: list[Access] = []
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
        units: list[int] = []
        seen: list[Any] = []
        shape = int_shape(list(buffer.shape))
        for k, index in enumerate(indices):
            unit = shape is not None and shape[k] == 1
            if unit and isinstance(index, tirx.IntImm) and int(index.value) == 0:
                units.append(k)
                continue
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
        if dims is None and not local and _is_reshape(buffer, indices, loop_vars, extents):
            accesses.append(Access(buffer, None, reshape=True))
            return
        if units and (dims is None or not dims or local or packed):
            dims = None  # a unit dim beside anything but plain loop variables: as before
        kept = divs if packed else None
        shifted = _shift_dims(indices, loop_vars) if dims is None and not local and not units else None
        accesses.append(Access(buffer, dims, kept, local or None, units=units or None, shifted=shifted))

    tvm_ffi.structural_walk(
        loops[-1].body,
        [
            (tirx.BufferStore, lambda s: record(s.buffer, s.indices)),
            (ir.TensorLoad, lambda e: record(e.source, e.indices)),
        ],
    )
    where = location_from_span(loops[0].span) or first_span(loops[0])
    nest = Nest(loops, [int(e) for e in extents if e is not None], accesses, where)
    if has_annotation(loops[0], USER_LOOP_LAYOUT):
        given = decode_layout(loops[0].annotations[USER_LOOP_LAYOUT])
        nest.fragment = given if isinstance(given, Fragment) else None
        nest.given = True
    return nest


def check_given_loop_layout(nest: Nest, threads: int) -> None:
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


def with_local_dims(nested: Fragment, shape: Sequence[int], local: Sequence[int]) -> Fragment:
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


def collect_items(func: Any) -> tuple[list[OpItem | Nest], list[Any]]:
    items: list[OpItem | Nest] = []
    fragments: list[Any] = []
    inside: set[Any] = set()

    def on_stmt(node: Any) -> Any:
        if isinstance(node, tirx.AllocBuffer) and is_fragment_buffer(node.buffer):
            fragments.append(node.buffer)
        elif isinstance(node, tirx.Evaluate) and op_class_of(node.value) is not None:
            op = decode(node.value)
            op.span = node.span if op.span is None else op.span
            items.append(OpItem(op, location_from_span(node.span) or op.location, node.__chandle__()))
        elif isinstance(node, tirx.For) and is_parallel(node) and node not in inside:
            nest = parallel_nest(node)
            inside.update(nest)
            item = nest_item(nest)
            if item is not None:
                items.append(item)
        return None

    tvm_ffi.structural_walk(
        func.body, [(tirx.AllocBuffer, on_stmt), (tirx.Evaluate, on_stmt), (tirx.For, on_stmt)], order="pre"
    )
    return items, fragments
