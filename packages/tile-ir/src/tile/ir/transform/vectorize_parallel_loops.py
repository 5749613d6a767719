"""Pass ``vectorize_parallel_loops``: schedule ``T.Parallel`` loops for a single thread.

For targets that run a whole block on one core (the CPU). Needs: ``T.Parallel``
loops as ``For`` nodes with the ``tile.parallel`` annotation (from the front end or
from ``lower_tile_ops``). Guarantees: no ``tile.parallel`` annotation is left; the
innermost loop of each parallel nest becomes ``vectorized`` code when its extent is
a constant and its body has no nested loop, and every other parallel loop becomes
``serial``. Iterations are independent, so this order is always valid.

* Extents up to ``MAX_VECTOR_LANES`` become one vectorized loop; longer ones are
  strip-mined into a serial loop over ``MAX_VECTOR_LANES``-lane vectorized chunks plus
  one vectorized tail (``extent % MAX_VECTOR_LANES`` lanes).
* Per-iteration locals are scalar-expanded first. A scalar local in a loop body
  (``x = A[i] * 2``) is a ``Bind`` (or a one-element buffer allocated per iteration);
  apache-tvm 0.27's vectorizer gives all lanes that single slot, so each lane would
  read lane 0's value. Each such local becomes a ``lanes``-element local buffer indexed
  by the vectorized loop variable (allocated before the loop), which vectorizes
  correctly: LLVM keeps such small arrays in vector registers. Bodies with other
  per-iteration declarations (``DeclBuffer``) stay serial.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import PARALLEL_LOOP, has_annotation
from ._traverse import loop_over
from .pipeline import function_pass
from .properties import PARALLEL_LOOPS_SCHEDULED, PARALLEL_NESTS

MAX_VECTOR_LANES = 64
"""Lanes of one vectorized loop (four 512-bit registers of float32); longer loops are strip-mined."""

MAX_EXPANDED_BYTES = 4096
"""Largest per-iteration local buffer that is scalar-expanded (per lane, times the lanes)."""


def _contains_loop(body: Any) -> bool:
    hit = tvm_ffi.structural_walk(body, (tirx.For, lambda _: tvm_ffi.VisitInterrupt(True)))
    return hit is not None


def vector_safe(body: Any) -> bool:
    """Whether TVM's vectorizer handles ``body`` correctly as is (no locals, no nested loop).

    A scalar local in a loop body is a ``Bind`` or a per-iteration buffer; TVM's
    vectorizer gives all lanes one slot. ``expand_locals`` makes such bodies safe.
    """
    per_iteration = (tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer)
    hit = tvm_ffi.structural_walk(body, [(t, lambda _: tvm_ffi.VisitInterrupt(True)) for t in per_iteration])
    return hit is None and not _contains_loop(body)


def _const_shape(buffer: Any) -> list[int] | None:
    dims = [int(d.value) if isinstance(d, tirx.IntImm) else None for d in buffer.shape]
    return None if any(d is None for d in dims) else [d for d in dims if d is not None]


def _bytes(dtype: Any, count: int) -> int:
    dt = tvm_ffi.dtype(str(dtype))
    return (int(dt.bits) * int(dt.lanes) + 7) // 8 * count


def expand_locals(body: Any, lane: Any, lanes: int) -> tuple[list[Any], Any] | None:
    """``(allocations, body')``: ``body`` with its per-iteration locals given one slot per lane.

    ``lane`` is the loop variable that will be vectorized over ``lanes``. A ``Bind x = e``
    becomes ``x_lanes[lane] = e`` with every use of ``x`` reading ``x_lanes[lane]``; a
    local buffer ``b`` allocated in the body becomes ``b_lanes[lane, ...]``. Returns
    ``None`` when the body has a local it cannot expand (a ``DeclBuffer``, a symbolic
    or large allocation); the loop must then stay serial.
    """
    binds: dict[Any, Any] = {}  # bound var -> its lane buffer
    buffers: dict[Any, Any] = {}  # per-iteration buffer -> its lane buffer
    refused: list[Any] = []

    def on_bind(node: Any) -> None:
        var = node.var
        if _bytes(var.ty, lanes) > MAX_EXPANDED_BYTES:
            refused.append(node)
            return
        binds[var] = tirx.decl_buffer((lanes,), str(var.ty), name=f"{var.name}_lanes", scope="local")

    def on_alloc(node: Any) -> None:
        buf = node.buffer
        shape = _const_shape(buf)
        if shape is None or _bytes(buf.dtype, lanes * max(1, _prod(shape))) > MAX_EXPANDED_BYTES:
            refused.append(node)
            return
        buffers[buf] = tirx.decl_buffer((lanes, *shape), buf.dtype, name=f"{buf.name}_lanes", scope="local")

    tvm_ffi.structural_walk(
        body,
        [
            (tirx.Bind, on_bind),
            (tirx.AllocBuffer, on_alloc),
            (tirx.DeclBuffer, lambda node: refused.append(node)),
        ],
    )
    if refused:
        return None
    if not binds and not buffers:
        return [], body

    def lane_buffer(buffer: Any) -> Any:
        for old, new in buffers.items():
            if buffer.same_as(old):
                return new
        return None

    def on_var(var: Any) -> Any:
        for old, new in binds.items():
            if var.same_as(old):
                return tirx.BufferLoad(new, [lane])
        return var

    def on_load(load: Any) -> Any:
        new = lane_buffer(load.source)
        return load if new is None else tirx.BufferLoad(new, [lane, *load.indices])

    def on_stmt(stmt: Any) -> Any:
        if isinstance(stmt, tirx.Bind):
            for old, new in binds.items():
                if stmt.var.same_as(old):
                    return tirx.BufferStore(new, stmt.value, [lane])
            return stmt
        if isinstance(stmt, tirx.AllocBuffer) and lane_buffer(stmt.buffer) is not None:
            return tirx.Evaluate(0)
        if isinstance(stmt, tirx.BufferStore):
            new = lane_buffer(stmt.buffer)
            if new is not None:
                return tirx.BufferStore(new, stmt.value, [lane, *stmt.indices])
        return stmt

    # Binds become stores first (so no Bind defines a variable any more), then uses
    body = tvm_ffi.structural_map(body, [(t, on_stmt) for t in (tirx.Bind, tirx.AllocBuffer)])
    body = tvm_ffi.structural_map(
        body, [(ir.TensorLoad, on_load), (ir.Var, on_var), (tirx.BufferStore, on_stmt)]
    )
    allocations = [tirx.AllocBuffer(b) for b in [*binds.values(), *buffers.values()]]
    return allocations, body


def _prod(values: list[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def without(annotations: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """``annotations`` as a dict, minus ``keys``."""
    if annotations is None:
        return {}
    return {str(k): v for k, v in annotations.items() if str(k) not in keys}


def _substitute(body: Any, var: Any, value: Any) -> Any:
    return tvm_ffi.structural_map(body, (ir.Var, lambda v: value if v.same_as(var) else v))


def _vector_loop(var: Any, start: Any, lanes: int, body: Any, notes: dict[str, Any]) -> Any | None:
    """``for var' in vectorized(lanes): body[var := start + var']``, locals expanded; None if unsafe."""
    if _is_zero(start):  # the loop itself: keep its variable
        lane, inner = var, body
    else:
        lane = tirx.Var(f"{var.name}_v", str(var.ty))
        inner = _substitute(body, var, start + lane)
    expanded = expand_locals(inner, lane, lanes)
    if expanded is None:
        return None
    allocations, inner = expanded
    kind = tirx.ForKind.VECTORIZED if lanes > 1 else tirx.ForKind.SERIAL
    loop = tirx.For(lane, 0, lanes, kind, inner, None, notes)
    return tirx.SeqStmt([*allocations, loop]) if allocations else loop


def vectorize_loop(loop: Any, body: Any, notes: dict[str, Any]) -> Any | None:
    """The loop ``for var in range(extent): body`` as vectorized chunks, or None if it must stay serial."""
    extent = loop.extent
    if not isinstance(extent, tirx.IntImm) or int(extent.value) < 2 or _contains_loop(body):
        return None
    var, n = loop.loop_var, int(extent.value)
    if n <= MAX_VECTOR_LANES:
        return _vector_loop(var, loop.min, n, body, notes)
    chunks, tail = divmod(n, MAX_VECTOR_LANES)
    outer = tirx.Var(f"{var.name}_o", str(var.ty))
    base = outer * MAX_VECTOR_LANES if _is_zero(loop.min) else loop.min + outer * MAX_VECTOR_LANES
    main = _vector_loop(var, base, MAX_VECTOR_LANES, body, {})  # base is never 0: a new lane var
    if main is None:
        return None
    stmts = [tirx.For(outer, 0, chunks, tirx.ForKind.SERIAL, main, None, notes)]
    if tail:
        rest = tirx.const(chunks * MAX_VECTOR_LANES, str(var.ty))
        tail_loop = _vector_loop(var, rest if _is_zero(loop.min) else loop.min + rest, tail, body, {})
        if tail_loop is None:
            return None
        stmts.append(tail_loop)
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _is_zero(expr: Any) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 0


def vectorize_function(func: Any) -> Any:
    """Make ``T.Parallel`` loops serial, with a vectorized innermost loop (see module docstring)."""

    def on_for(loop: Any, m: Any) -> Any:
        body = m.mutate(loop.body)
        if not has_annotation(loop, PARALLEL_LOOP):
            return loop_over(loop, body)
        notes = without(loop.annotations, (PARALLEL_LOOP,))
        vectorized = vectorize_loop(loop, body, notes)
        if vectorized is not None:
            return vectorized
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, body, None, notes)

    return func.with_body(tvm_ffi.structural_mutate(func.body, (tirx.For, on_for)))


VECTORIZE_PARALLEL_LOOPS = function_pass(
    vectorize_function, name="vectorize_parallel_loops", needs={PARALLEL_NESTS},
    guarantees={PARALLEL_LOOPS_SCHEDULED}, invalidates={PARALLEL_NESTS})  # fmt: skip
vectorize_parallel_loops = VECTORIZE_PARALLEL_LOOPS.run
