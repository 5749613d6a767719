"""Pass ``bind_parallel_loops``: thread binding and vectorization of ``T.Parallel`` nests.

Needs: ``T.Parallel`` nests as ``For`` chains annotated ``tile.parallel`` (tile ops
already lowered), optionally with the nest's fragment in ``tile.loop_fragment`` (from
``infer_layout``); for thread-binding targets, the block's threads as a
``threadIdx.x`` ``thread_extent`` attribute around the nest.

Guarantees: no ``tile.parallel`` or ``tile.loop_fragment`` annotation is left.

* Targets with ``Capabilities.thread_binding``: each nest with constant extents
  becomes ``for l in range(locals_per_thread): body[x := F^-1(threadIdx.x, l)]``
  where ``F`` is the nest's fragment (row-major over the block's threads when
  none was inferred); iterations of ``F``'s padding and threads beyond ``F``'s
  thread count are guarded off. The innermost local loop is ``vectorized`` when
  consecutive locals touch consecutive elements of the last dim and no guard is
  needed; where they do so only in runs (an mma accumulator's column pairs), the loop
  is split and each run is one vector access, if every memory access of a run
  provably starts aligned to its width (:func:`_aligned_run`). A fragment that
  replicates iterations over threads runs each iteration on every thread holding a
  copy (the replica becomes one more local dim): register writes happen on every
  copy, while stores to global or shared memory (atomics included) and calls are
  guarded to run on one copy per element.
* A nest with symbolic extents (no fragment to bind it) that touches no fragment and writes
  no thread-local memory: the block's threads take its iterations in turn, row-major over
  the nest (``for k in range(ceildiv(total, threads))``, iteration ``k * threads + tx``,
  guarded); inside ``if tx < n`` only those threads do. Others (under ``if tx % 2 == 0``, or
  touching fragments or thread-local memory) are a typed refusal.
* Other targets (the CPU, one thread per block): exactly ``vectorize_parallel_loops``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.layout import Fragment, UnsupportedExpr, box_grid, evaluate_over

from ..annotations import LOOP_FRAGMENT, has_annotation
from ..buffer_offsets import flat_offset
from ..errors import LayoutInferenceError, TileError, UnsupportedOnTargetError, location_from_span
from ..ops.layout_rules import decode_layout, is_fragment_buffer, is_thread_private, linear_fragment
from ..ops.loops import serial_nest
from ._traverse import mutate
from .infer_layout import (
    active_thread_range,
    block_threads,
    first_span,
    fragment_threads_of,
    is_parallel,
    layout_map_of,
    mentions_var,
    parallel_nest,
)
from .pipeline import CompileContext, context_function_pass
from .properties import PARALLEL_LOOPS_SCHEDULED, PARALLEL_NESTS, TILE_OPS_LOWERED
from .vectorize_parallel_loops import MAX_VECTOR_LANES, vector_safe, vectorize_function, without

MAX_UNROLLED_LOCALS = 64
"""Local loops of a replicated nest with a once-per-element guard are unrolled up to this size."""


def loop_fragment(nest: list[Any], threads: int) -> Fragment | None:
    """The fragment binding ``nest`` to threads: its annotation, else row-major; None if symbolic."""
    if has_annotation(nest[0], LOOP_FRAGMENT):
        layout = decode_layout(nest[0].annotations[LOOP_FRAGMENT])
        return layout if isinstance(layout, Fragment) else None
    extents = [loop.extent for loop in nest]
    if not all(isinstance(e, tirx.IntImm) for e in extents):
        return None
    return linear_fragment([int(e.value) for e in extents], threads)


def _substitute(node: Any, table: dict[Any, Any]) -> Any:
    def swap(v: Any) -> Any:
        for old, new in table.items():
            if v.same_as(old):
                return new
        return v

    return tvm_ffi.structural_map(node, (ir.Var, swap))


def bind_nest(nest: list[Any], frag: Fragment, thread_var: Any, threads: int, body: Any) -> Any:
    """``body`` (the nest's innermost body) rebound to ``thread_var`` and local loops of ``frag``."""
    replicas, once = frag.replicate_size, False
    if replicas > 1:
        frag = _replicas_as_dim(frag, nest)
    inverse, guard = frag.as_layout().inverse_with_guard()
    out_shape = [int(e) for e in inverse.get_input_shape()]
    local_vars = [tirx.Var(f"{nest[-1].loop_var}_l{d}", "int32") for d in range(len(out_shape) - 1)]
    point = [thread_var, *local_vars]
    coords = inverse.map_forward_index(point)
    table = dict(zip(inverse.get_forward_vars(), point, strict=True))
    cond = _substitute(guard, table)
    analyzer = tvm.sym.Analyzer()
    analyzer.bind(thread_var, ir.Range(0, threads))
    for var, extent in zip(local_vars, out_shape[1:], strict=True):
        analyzer.bind(var, ir.Range(0, extent))
    if out_shape[0] < threads:
        cond = tirx.And(cond, thread_var < out_shape[0])
    cond = analyzer.simplify(cond)
    stmt = _substitute(body, dict(zip([loop.loop_var for loop in nest], coords[: len(nest)], strict=True)))
    guarded = not (isinstance(cond, tirx.IntImm) and int(cond.value) == 1)
    if replicas > 1:
        shape = [int(loop.extent.value) for loop in nest]
        chosen = tirx.floormod(_flat(coords[: len(nest)], shape), replicas)
        stmt, once = _side_effects_once(stmt, analyzer.simplify(tirx.EQ(coords[len(nest)], chosen)))
    # a guard that picks one copy per element reads the local index: unrolled, the
    # registers keep constant indices (a rolled loop would put them in local memory)
    unroll = once and math.prod(out_shape[1:]) <= MAX_UNROLLED_LOCALS
    if guarded:
        stmt = tirx.IfThenElse(cond, stmt, None)
    plain = not guarded and not once and bool(local_vars)
    bounds = {thread_var: threads, **dict(zip(local_vars[:-1], out_shape[1:-1], strict=True))}
    vector = (
        plain
        and vector_safe(stmt)
        and _contiguous(coords, local_vars[-1])
        and _vector_aligned(stmt, local_vars[-1], out_shape[-1], bounds)
    )
    if plain and not vector and vector_safe(stmt):
        run = _aligned_run(coords, local_vars[-1], out_shape[-1], stmt, bounds)
        if run > 1:  # the inner local dim as (outer, run): the run is one aligned vector
            name = local_vars[-1].name
            outer, lane = tirx.Var(f"{name}_o", "int32"), tirx.Var(f"{name}_v", "int32")
            stmt = _substitute(stmt, {local_vars[-1]: outer * run + lane})
            stmt = tirx.For(lane, 0, run, tirx.ForKind.VECTORIZED, stmt)
            kind = tirx.ForKind.UNROLLED if unroll else tirx.ForKind.SERIAL
            stmt = tirx.For(outer, 0, out_shape[-1] // run, kind, stmt)
            local_vars, out_shape = local_vars[:-1], out_shape[:-1]
    for d in reversed(range(len(local_vars))):
        inner = d == len(local_vars) - 1
        lanes = out_shape[d + 1]
        if inner and vector and 1 < lanes <= MAX_VECTOR_LANES:
            kind = tirx.ForKind.VECTORIZED
        elif unroll:
            kind = tirx.ForKind.UNROLLED
        else:
            kind = tirx.ForKind.SERIAL
        stmt = tirx.For(local_vars[d], 0, lanes, kind, stmt)
    return stmt


def _replicas_as_dim(frag: Fragment, nest: list[Any]) -> Fragment:
    """A replicated fragment as an unreplicated one with the replica as a last dim.

    Every thread holding a copy of an element runs the iteration (each updates its
    own copy), so ``(x, rep) -> (thread(x, rep), index(x))`` is bound instead; it is
    injective because a condensed fragment never gives one thread two replicas.
    """
    shape = [int(e) for e in frag.get_input_shape()] + [frag.replicate_size]
    try:
        out = Fragment(
            shape,
            forward_thread_fn=lambda *v: frag.map_forward_thread(list(v[:-1]), v[-1]),
            forward_index_fn=lambda *v: frag.map_forward_index(list(v[:-1])),
        )
        out.as_layout().inverse_with_guard()
    except TileError as exc:
        raise UnsupportedOnTargetError(
            f"a T.Parallel loop whose fragment replicates iterations over threads ({frag}) "
            f"cannot be thread-bound: {exc.message}",
            hint="copy the replicated operand into an unreplicated fragment first",
            location=location_from_span(nest[0].span),
        ) from None
    return out


def _flat(coords: list[Any], shape: list[int]) -> Any:
    flat: Any = tirx.const(0, "int32")
    for coord, extent in zip(coords, shape, strict=True):
        flat = flat * extent + coord
    return flat


def _side_effects_once(stmt: Any, cond: Any) -> tuple[Any, bool]:
    """``stmt`` with its effects on memory other threads see run by one replica only.

    A replicated iteration runs on every thread holding a copy of its element: writes
    to that thread's registers must happen on each copy, but a store to global or
    shared memory (an atomic update above all) or an opaque call must happen once per
    element. ``cond`` picks the replica that performs them (spread over the replicas by
    element, so no one thread does all of them). Returns the statement and whether a
    guard was placed.
    """
    placed = [False]

    def guard(node: Any) -> Any:
        placed[0] = True
        return tirx.IfThenElse(cond, node, None)

    def on_store(store: Any) -> Any:
        return store if str(store.buffer.scope()).startswith("local") else guard(store)

    out = tvm_ffi.structural_map(stmt, [(tirx.BufferStore, on_store), (tirx.Evaluate, guard)])
    return out, placed[0]


VECTOR_BYTES = 16
"""The widest vector access a thread makes (``float4``, ``uint4``; 8 halfs)."""


def _aligned_run(coords: list[Any], var: Any, extent: int, stmt: Any, bounds: dict[Any, int]) -> int:
    """The widest run ``r`` of locals ``var = o * r + v`` that is one aligned vector access.

    A fragment whose consecutive locals are contiguous only in pairs or quads (the mma
    and wgmma accumulators: two columns per thread, then a jump of eight) cannot vectorize
    its whole local loop; split, each run of ``r`` locals is ``r`` consecutive elements
    of the last dim. The run is used only where every access to memory other than
    registers starts ``r``-aligned (its flattened index at ``v = 0`` provably a multiple of
    ``r``; the launcher checks the tensors' own alignment), since a vector access to an
    address that is not a multiple of its size faults on a GPU. ``bounds``: the extents
    of the other variables (the thread, the outer locals). 1: no such run.
    """
    accesses = _memory_accesses(stmt)
    if not accesses:
        return 1
    run = _widest(accesses)
    outer, lane = tirx.Var("o", "int32"), tirx.Var("v", "int32")
    while run > 1:
        if extent % run == 0:
            analyzer = _bounded(bounds)
            analyzer.bind(outer, ir.Range(0, extent // run))
            split = {var: outer * run + lane}
            at_start = {var: outer * run}
            starts = all(_starts_aligned(b, i, at_start, run, analyzer) for b, i in accesses)
            analyzer.bind(lane, ir.Range(0, run - 1))
            inner = [_substitute(c, split) for c in coords]
            if starts and _contiguous(inner, lane, analyzer):
                return run
        run //= 2
    return 1


def _vector_aligned(stmt: Any, var: Any, lanes: int, bounds: dict[Any, int]) -> bool:
    """Whether the whole local loop over ``var`` (``lanes`` locals) starts every access aligned.

    TVM prints a vector access as pieces of at most 16 bytes, each aligned to its size when
    the first is; ``lanes`` that no power of two above 1 divides need element alignment only.
    """
    accesses = _memory_accesses(stmt)
    width = min(_widest(accesses), lanes & -lanes) if accesses else 1
    analyzer, start = _bounded(bounds), {var: tirx.const(0, "int32")}
    return width == 1 or all(_starts_aligned(b, i, start, width, analyzer) for b, i in accesses)


def _memory_accesses(stmt: Any) -> list[tuple[Any, list[Any]]]:
    """The (buffer, indices) of every load and store of ``stmt`` outside registers."""
    accesses: list[tuple[Any, list[Any]]] = []

    def visit(buffer: Any, indices: Any) -> None:
        if not str(buffer.scope()).startswith("local"):
            accesses.append((buffer, list(indices)))

    tvm_ffi.structural_walk(
        stmt,
        [
            (tirx.BufferStore, lambda node: visit(node.buffer, node.indices)),
            (ir.TensorLoad, lambda node: visit(node.source, node.indices)),
        ],
    )
    return accesses


def _widest(accesses: list[tuple[Any, list[Any]]]) -> int:
    """Elements of the widest vector access (16 bytes) of the widest element accessed."""
    bits = max(int(tvm.DataType(str(buffer.dtype)).bits) for buffer, _ in accesses)
    return max(VECTOR_BYTES * 8 // bits, 1)


def _bounded(bounds: dict[Any, int]) -> Any:
    analyzer = tvm.sym.Analyzer()
    for var, extent in bounds.items():
        analyzer.bind(var, ir.Range(0, extent))
    return analyzer


def _starts_aligned(
    buffer: Any, indices: list[Any], at_start: dict[Any, Any], run: int, analyzer: Any
) -> bool:
    # through the buffer's strides: a T.StridedTensor's rows start where its strides say (a
    # symbolic row stride proves no alignment, and its loads stay scalar)
    flat = flat_offset(buffer, indices)
    return bool(analyzer.can_prove(tirx.floormod(_substitute(flat, at_start), run) == 0))


def _contiguous(coords: list[Any], var: Any, analyzer: Any = None) -> bool:
    analyzer = analyzer or tvm.sym.Analyzer()
    step = [analyzer.simplify(_substitute(c, {var: var + 1}) - c) for c in coords]
    ones = [int(s.value) if isinstance(s, tirx.IntImm) else None for s in step]
    return ones[-1] == 1 and all(x == 0 for x in ones[:-1])


def _check_irregular_reads(
    nest: list[Any],
    frag: Fragment,
    threads: int,
    body: Any,
    layouts: dict[str, Any],
    outer: list[tuple[Any, int, int]] | None = None,
) -> None:
    """Refuse a read or a write of a fragment element that the iteration's thread may not hold.

    A thread reads only its own registers. A fragment indexed by the nest's loop variables
    gets its layout from the nest (``infer_layout``), so each element is where its
    iteration runs; one indexed otherwise (``scale[i, 0]``, ``x[i + 1]``) keeps a layout of
    its own, and the element may sit on another thread: the read then silently returns
    that thread's unrelated register (it did for tile-ops' dequant scales on sm_80). Each
    such read must provably hit the reading thread's own element; otherwise this is a typed
    error with the loop's line. A write is held to the same rule: a store into another
    thread's element lands in the writer's register of that index, and the owner never sees
    it (``B_local[i * 192 + j] = A_local[i, j]`` wrote 2 of 3 elements of a 32 x 576 tile into
    the wrong threads before ``infer_layout`` read such an index as the nest reshaped; a copy
    into a ``(1, N)`` tile stored ``A_local[0, i]`` in a binding of its own before unit dims
    counted).
    Replicated fragments are not checked (every replica holds the element of some threads
    only, which the analyzer cannot state).

    Where the analyzer cannot prove it (``acc[i + s * 16, j]`` under ``if i < 16:``, in a loop
    ``for s in range(2)``: the rows of one thread are 16 apart in an mma accumulator), every
    point the access runs at is checked instead: the nest's iterations and the values of the
    enclosing loops of constant range (``outer``), where the ``if`` conditions around the
    access in the nest hold (:func:`_owned_at_every_point`).
    """
    loop_vars = [loop.loop_var for loop in nest]
    shape = [int(loop.extent.value) for loop in nest]
    reads: list[tuple[Any, list[Any], str, list[Any]]] = []

    def visit(buffer: Any, indices: list[Any], how: str, conds: list[Any]) -> None:
        if not is_fragment_buffer(buffer):
            return
        plain = [next((d for d, v in enumerate(loop_vars) if isinstance(i, ir.Var) and i.same_as(v)), None)
                 for i in indices]  # fmt: skip
        if None not in plain and len(set(plain)) == len(plain):
            return
        reads.append((buffer, indices, how, conds))

    _walk_accesses(body, [], visit)
    if not reads:
        return
    analyzer = tvm.sym.Analyzer()
    for var, extent in zip(loop_vars, shape, strict=True):
        analyzer.bind(var, ir.Range(0, extent))
    for buffer, indices, how, conds in reads:
        layout = layouts.get(str(buffer.name))
        if not isinstance(layout, Fragment) or layout.replicate_size != 1 or frag.replicate_size != 1:
            continue
        runner = frag.map_forward_thread(loop_vars)
        owner = layout.map_forward_thread(indices)
        if analyzer.can_prove(owner == runner):
            continue
        if _owned_at_every_point(runner, owner, indices, layout, loop_vars, shape, conds, outer or []):
            continue
        index_text = ", ".join(str(i) for i in indices)
        raise LayoutInferenceError(
            f"{buffer.name}[{index_text}] is {how} inside a T.Parallel loop over "
            f"({', '.join(str(v) for v in loop_vars)}) on a thread that may not hold that element "
            f"(a fragment lives in the registers of the threads its layout gives it)",
            hint=f"index {buffer.name} by the loop variables alone (a ({shape[0]},) fragment read at "
            f"[i] instead of a (n, 1) one at [i, 0]) or in the loop's row-major order (a flat fragment "
            f"at [i * n + j] over T.Parallel(m, n)), or go through shared memory",
            location=location_from_span(nest[0].span) or first_span(nest[0]),
        )


def _walk_accesses(stmt: Any, conds: list[Any], visit: Any) -> None:
    """``visit(buffer, indices, "read" | "written", conditions)`` for every buffer access in
    ``stmt``, with the ``if`` conditions that enclose it (an ``else`` branch: the negation)."""

    def loads(expr: Any) -> None:
        tvm_ffi.structural_walk(
            expr, (ir.TensorLoad, lambda load: visit(load.source, list(load.indices), "read", conds))
        )

    if isinstance(stmt, tirx.SeqStmt):
        for part in stmt.seq:
            _walk_accesses(part, conds, visit)
    elif isinstance(stmt, tirx.IfThenElse):
        loads(stmt.condition)
        _walk_accesses(stmt.then_case, [*conds, stmt.condition], visit)
        if stmt.else_case is not None:
            _walk_accesses(stmt.else_case, [*conds, tirx.Not(stmt.condition)], visit)
    elif isinstance(stmt, tirx.BufferStore):
        loads(stmt.value)
        for index in stmt.indices:
            loads(index)
        visit(stmt.buffer, list(stmt.indices), "written", conds)
    elif isinstance(stmt, tirx.For):
        loads(stmt.min)
        loads(stmt.extent)
        _walk_accesses(stmt.body, conds, visit)
    else:  # any other statement: its accesses, under the conditions known so far
        tvm_ffi.structural_walk(
            stmt,
            [
                (ir.TensorLoad, lambda load: visit(load.source, list(load.indices), "read", conds)),
                (tirx.BufferStore, lambda st: visit(st.buffer, list(st.indices), "written", conds)),
            ],
        )


MAX_CHECKED_POINTS = 1 << 20
"""Points (iterations x enclosing loop values) :func:`_owned_at_every_point` enumerates at most."""


def _owned_at_every_point(
    runner: Any,
    owner: Any,
    indices: list[Any],
    layout: Fragment,
    loop_vars: list[Any],
    shape: list[int],
    conds: list[Any],
    outer: list[tuple[Any, int, int]],
) -> bool:
    """Whether, at every point where ``conds`` hold, the element at ``indices`` is inside the
    fragment and its ``owner`` thread is the ``runner`` of the iteration. The points are the
    nest's iterations times the values of the ``outer`` loops; False where they are too many,
    or an expression reads anything else (a loaded value, a symbolic dim)."""
    extents = [*shape, *(extent for _, _, extent in outer)]
    if math.prod(extents) > MAX_CHECKED_POINTS:
        return False
    coords = box_grid(extents)
    env: dict[Any, Any] = dict(zip(loop_vars, coords[: len(loop_vars)], strict=True))
    for (var, start, _), offsets in zip(outer, coords[len(loop_vars) :], strict=True):
        env[var] = offsets + start
    dims = layout.const_input_shape()
    if dims is None:
        return False
    try:
        values = evaluate_over([runner, owner, *indices, *conds], env, (math.prod(extents),))
    except UnsupportedExpr:
        return False
    runs, held, where = values[0], values[1], values[2 : 2 + len(indices)]
    active = np.ones_like(runs, dtype=bool)
    for cond in values[2 + len(indices) :]:
        active &= cond.astype(bool)
    inside = np.ones_like(active)
    for index, extent in zip(where, dims, strict=True):
        inside &= (index >= 0) & (index < extent)
    return bool(np.all(~active | (inside & (runs == held))))


def _owner_only(
    stmt: Any, thread_var: Any, layouts: dict[str, Any], ranges: dict[str, tuple[int, int]]
) -> Any:
    """``stmt`` run only by the thread holding the fragment elements it reads.

    Outside ``T.Parallel`` nests every thread runs the same code; an element read at
    indices that do not depend on the thread is held by its owner thread(s) only, the
    others read their own unrelated register. A store to memory other threads see (or
    a call) reading such an element must run once, on the owner of replica 0.
    """
    conds: list[Any] = []

    def visit(load: Any) -> None:
        buffer = load.source
        if not is_fragment_buffer(buffer) or mentions_var(load.indices, thread_var):
            return
        frag = layouts.get(str(buffer.name))
        if isinstance(frag, Fragment):
            owner = frag.map_forward_thread(list(load.indices), 0)
            if str(buffer.name) in ranges:  # FRAGMENT_THREADS: its thread t is threadIdx.x == first + t
                owner = owner + ranges[str(buffer.name)][0]
            conds.append(tirx.EQ(thread_var, owner))

    tvm_ffi.structural_walk(stmt, (ir.TensorLoad, visit))
    if not conds:
        return stmt
    cond = conds[0]
    for c in conds[1:]:
        cond = tirx.And(cond, c)
    return tirx.IfThenElse(cond, stmt, None)


def _vector_fragment(shape: list[int], threads: int, body: Any) -> Fragment:
    """Row-major runs of one vector access (16 bytes of the widest element ``body`` moves)
    dealt to ``threads`` threads in turn; ``linear_fragment`` where the runs do not tile."""
    accesses = _memory_accesses(body)
    lanes = _widest(accesses) if accesses else 1
    if lanes < 2 or shape[-1] % lanes or math.prod(shape) % (lanes * threads):
        return linear_fragment(shape, threads)

    def fn(*v: Any) -> tuple[Any, Any]:
        e: Any = tirx.const(0, "int32")
        for var, extent in zip(v, shape, strict=True):
            e = e * extent + var
        run = tirx.floordiv(e, lanes)
        return tirx.floormod(run, threads), tirx.floordiv(run, threads) * lanes + tirx.floormod(e, lanes)

    return Fragment(list(shape), forward_fn=fn)


def _touches_fragments(stmt: Any) -> bool:
    return bool(_fragment_names(stmt))


def _fragment_names(stmt: Any) -> set[str]:
    found: set[str] = set()

    def visit(buffer: Any) -> None:
        if is_fragment_buffer(buffer):
            found.add(str(buffer.name))

    tvm_ffi.structural_walk(
        stmt,
        [
            (tirx.BufferStore, lambda node: visit(node.buffer)),
            (ir.TensorLoad, lambda node: visit(node.source)),
        ],
    )
    return found


def _bind_func(func: Any, ctx: CompileContext) -> Any:
    threads = block_threads(func, ctx)
    thread_vars: list[Any] = []
    layouts = layout_map_of(func)
    ranges = fragment_threads_of(func)
    in_nest = [0]
    conditions: list[Any] = []  # enclosing conditions on the thread index
    outer: list[tuple[Any, int, int]] = []  # enclosing loops of constant range: (var, min, extent)

    def on_if(node: Any, m: Any) -> Any:
        if in_nest[0] or not thread_vars or not mentions_var([node.condition], thread_vars[-1]):
            return m.default_mutate(node)
        branches: list[Any] = []
        for cond, branch in ((node.condition, node.then_case), (tirx.Not(node.condition), node.else_case)):
            if branch is None:
                branches.append(None)
                continue
            conditions.append(cond)
            try:
                branches.append(m.mutate(branch))
            finally:
                conditions.pop()
        return tirx.IfThenElse(node.condition, branches[0], branches[1])

    def on_effect(node: Any, m: Any) -> Any:
        node = m.default_mutate(node)
        if in_nest[0] or not thread_vars:
            return node
        if isinstance(node, tirx.BufferStore) and str(node.buffer.scope()).startswith("local"):
            return node
        return _owner_only(node, thread_vars[-1], layouts, ranges)

    def on_attr(node: Any, m: Any) -> Any:
        is_tx = str(node.attr_key) == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x"
        if is_tx:
            thread_vars.append(node.node.var)
        try:
            return m.default_mutate(node)
        finally:
            if is_tx:
                thread_vars.pop()

    def on_for(loop: Any, m: Any) -> Any:
        if not is_parallel(loop):
            known = isinstance(loop.min, tirx.IntImm) and isinstance(loop.extent, tirx.IntImm)
            if known:
                outer.append((loop.loop_var, int(loop.min.value), int(loop.extent.value)))
            try:
                return m.default_mutate(loop)
            finally:
                if known:
                    outer.pop()
        nest = parallel_nest(loop)
        frag = loop_fragment(nest, threads)
        in_nest[0] += 1
        try:
            body = m.mutate(nest[-1].body)
        finally:
            in_nest[0] -= 1
        if thread_vars and _writes_thread_private(body) and not _touches_fragments(body):
            # a thread's own buffer (T.alloc_local / T.alloc_var) filled by the nest: every
            # thread runs all of it, as TileLang does (spread over the threads, each would
            # hold only its share of the elements)
            return _per_thread(nest, body)
        symbolic = frag is None and not has_annotation(nest[0], LOOP_FRAGMENT)
        if symbolic and thread_vars and not _touches_fragments(body) and not _writes_locals(body):
            # extents known only at run time: the threads that run the nest take turns
            running = _running_threads(conditions, thread_vars[-1], threads)
            if running is not None:
                first, count = running
                return _bind_strided(nest, thread_vars[-1] - first, count, body)
        if frag is None or not thread_vars:
            raise UnsupportedOnTargetError(
                "a T.Parallel loop with symbolic extents (or outside a T.Kernel) cannot be thread-bound",
                hint="use constant tile extents inside T.Kernel",
                location=location_from_span(loop.span),
            )
        active = active_thread_range(conditions, thread_vars[-1], threads)
        if active is not None and not _touches_fragments(body):
            # inside `if tx < 128:` (or T.ws) only those threads run: spread the nest over them
            first, count = active
            frag = _vector_fragment([int(loop.extent.value) for loop in nest], count, body)
            local = tirx.Var(f"{thread_vars[-1].name}_active", "int32")
            bound = bind_nest(nest, frag, local, count, body)
            return _substitute(bound, {local: thread_vars[-1] - first})
        touched = {ranges.get(name) for name in _fragment_names(body)}
        if active is not None and touched == {active}:
            # fragments laid out over the range's threads (infer_layout's FRAGMENT_THREADS):
            # thread t of their layout is threadIdx.x == first + t
            first, count = active
            local = tirx.Var(f"{thread_vars[-1].name}_active", "int32")
            return _substitute(bind_nest(nest, frag, local, count, body), {local: thread_vars[-1] - first})
        _check_irregular_reads(nest, frag, threads, body, layouts, list(outer))
        return bind_nest(nest, frag, thread_vars[-1], threads, body)

    return func.with_body(
        mutate(
            func.body,
            [
                (tirx.AttrStmt, on_attr),
                (tirx.IfThenElse, on_if),
                (tirx.For, on_for),
                (tirx.BufferStore, on_effect),
                (tirx.Evaluate, on_effect),
            ],
        )
    )


def _writes_thread_private(stmt: Any) -> bool:
    """Whether ``stmt`` stores to a buffer each thread holds whole (``is_thread_private``) that
    lives outside it: a temporary of one iteration (``x = A[i] * 2`` in the body, which apache-tvm
    0.27 keeps in a one-element local buffer allocated there) is not such a buffer."""
    stored: list[Any] = []
    inner: list[Any] = []

    def on_store(store: Any) -> None:
        if is_thread_private(store.buffer):
            stored.append(store.buffer)

    def on_alloc(alloc: Any) -> None:
        inner.append(alloc.buffer)

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, on_store), (tirx.AllocBuffer, on_alloc)])
    return any(not any(b.same_as(a) for a in inner) for b in stored)


def _per_thread(nest: list[Any], body: Any) -> Any:
    """``nest`` around ``body`` as plain loops that every thread runs whole (``serial_nest``)."""
    stmt = body
    for loop in reversed(nest):
        stmt = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, stmt, None, loop.annotations)
    return serial_nest(stmt)


def _writes_locals(stmt: Any) -> bool:
    """Whether ``stmt`` stores to a thread's own memory (``T.alloc_local``/``T.alloc_var``):
    spread over the threads, each thread would hold only its share of the writes."""
    found: list[Any] = []

    def on_store(store: Any) -> None:
        if str(store.buffer.scope()).startswith("local"):
            found.append(store)

    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, on_store))
    return bool(found)


def _running_threads(conditions: list[Any], thread: Any, threads: int) -> tuple[int, int] | None:
    """``(first, count)``: the range of threads the enclosing ``conditions`` keep (all of them
    without conditions); None where they keep threads that are not one range (``tx % 2 == 0``)."""
    active = active_thread_range(conditions, thread, threads)
    if active is not None or not conditions:
        return active or (0, threads)
    analyzer = tvm.sym.Analyzer()
    analyzer.bind(thread, ir.Range(0, threads))
    joined = conditions[0]
    for cond in conditions[1:]:
        joined = tirx.And(joined, cond)
    return (0, threads) if analyzer.can_prove(joined) else None


def _bind_strided(nest: list[Any], thread: Any, threads: int, body: Any) -> Any:
    """``body`` of a nest with symbolic extents, the iterations (row-major over the nest) dealt
    to the ``threads`` threads in turn: ``for k in range(ceildiv(total, threads))``, iteration
    ``k * threads + thread``, guarded by ``< total``. Each iteration runs on exactly one thread."""
    extents = [loop.extent for loop in nest]
    total = extents[0]
    for extent in extents[1:]:
        total = total * extent
    step = tirx.Var(f"{nest[-1].loop_var.name}_step", str(total.ty))
    flat = step * tirx.const(threads, str(total.ty)) + tirx.Cast(str(total.ty), thread)
    coords: list[Any] = []
    rest = flat
    for extent in reversed(extents[1:]):
        coords.append(tirx.floormod(rest, extent))
        rest = tirx.floordiv(rest, extent)
    coords.append(rest)
    coords.reverse()
    table = {
        loop.loop_var: loop.min
        + (coord if coord.ty == loop.loop_var.ty else tirx.Cast(str(loop.loop_var.ty), coord))
        for loop, coord in zip(nest, coords, strict=True)
    }
    stmt = tirx.IfThenElse(flat < total, _substitute(body, table), None)
    steps = tirx.floordiv(total + tirx.const(threads - 1, str(total.ty)), tirx.const(threads, str(total.ty)))
    return tirx.For(step, 0, steps, tirx.ForKind.SERIAL, stmt)


def _strip_fragments(func: Any) -> Any:
    def on_for(loop: Any) -> Any:
        if not has_annotation(loop, LOOP_FRAGMENT):
            return loop
        notes = without(loop.annotations, (LOOP_FRAGMENT,))
        return tirx.For(
            loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, notes
        )

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, on_for)))


def _bind_or_vectorize(func: Any, ctx: CompileContext) -> Any:
    """Bind parallel nests to threads (GPU-like targets) or vectorize them (CPU)."""
    if ctx.capabilities.thread_binding:
        return _bind_func(func, ctx)
    return vectorize_function(_strip_fragments(func))


BIND_PARALLEL_LOOPS = context_function_pass(
    _bind_or_vectorize, name="bind_parallel_loops", needs={TILE_OPS_LOWERED, PARALLEL_NESTS},
    guarantees={PARALLEL_LOOPS_SCHEDULED}, invalidates={PARALLEL_NESTS})  # fmt: skip
bind_parallel_loops = BIND_PARALLEL_LOOPS.run
