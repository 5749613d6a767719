"""Pass ``plan_pipeline``: a stage and order for every statement of a ``T.Pipelined`` body.

Needs: tile IR (before ``lower_tile_ops``) with pipelined loops annotated
``tile.pipelined`` / ``tile.num_stages`` and optionally the user's
``tile.pipeline_order`` / ``tile.pipeline_stage``.

Guarantees: every pipelined loop carries ``tile.pipeline_stage`` and
``tile.pipeline_order`` (one entry per body statement) that respect every
dependence, and ``tile.pipeline_versioned`` (the shared buffers a backend must
keep ``num_stages`` copies of). Statement ``s`` of iteration ``k`` runs in pipeline
step ``k + stage[s]``, ordered inside a step by ``order``. The loop body itself is
unchanged, so a backend without asynchronous copies (the CPU) runs it serially.

Dependences are computed on whole buffers from the statements' reads and writes
(tile-op operands, loads and stores in plain statements): RAW, WAR and WAW inside an
iteration (``i`` before ``j`` needs ``(stage, order)[i] < (stage, order)[j]``) and
across iterations (``j`` of iteration ``k`` before ``i`` of ``k + 1``). Atomic
updates read and write their destination, so they keep their place after the
statement producing their value and relative to every other access of it. The one
relaxation is the point of pipelining: a shared buffer written only by a copy from
memory (a *producer* copy) is versioned, so the next iterations' copies into it do
not wait for this iteration's readers. A ``T.reshape`` / ``T.view`` is its buffer:
its accesses are the buffer's, and a copy into it is no producer (the buffer is not
versioned through a view, so such a copy keeps its place in the iteration).

Without user input, producer copies go to stage 0 and everything else to
``num_stages - 1``; stages are then raised until every dependence holds (all in one
stage always does). A user order/stage that breaks a dependence raises
``PipelinePlanError`` naming both statements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import (
    NUM_STAGES,
    PIPELINE_ORDER,
    PIPELINE_STAGE,
    PIPELINE_VERSIONED,
    PIPELINED_LOOP,
    has_annotation,
)
from ..errors import PipelinePlanError, SourceLocation, location_from_span
from ..ops import Copy, Fill, Gemm, Reduce, TileOp, decode, op_class_of
from ..ops.layout_rules import is_fragment_buffer, is_shared_buffer
from ._named_values import is_scalar_local
from ._traverse import loop_over, mutate, whole_views
from .infer_layout import mentions_var
from .pipeline import function_pass
from .properties import PIPELINE_PLANNED, PIPELINED_LOOPS, TILE_OPS


@dataclasses.dataclass
class Access:
    """What one body statement reads and writes (buffer names)."""

    reads: set[str]
    writes: set[str]
    what: str
    location: SourceLocation | None
    producer: str | None = None  # the shared buffer a global->shared copy fills

    def describe(self, index: int) -> str:
        where = f" at line {self.location.line}" if self.location is not None else ""
        text = (
            f" `{self.location.source_line.strip()}`" if self.location and self.location.source_line else ""
        )
        return f"statement {index} ({self.what}{where}{text})"


def _loads(node: Any) -> set[str]:
    found: set[str] = set()
    tvm_ffi.structural_walk(node, (ir.TensorLoad, lambda e: found.add(str(e.source.name))))
    return found


def _op_access(op: TileOp) -> tuple[set[str], set[str], str]:
    name = "T." + op.op_name.split(".", 1)[1]
    if isinstance(op, Copy):
        return {op.src.name}, {op.dst.name}, name
    if isinstance(op, Fill):
        return set(), {op.dst.name}, name
    if isinstance(op, Gemm):
        reads = {op.a.name, op.b.name} | (set() if op.clear_accum else {op.c.name})
        return reads, {op.c.name}, name
    if isinstance(op, Reduce):
        return {op.src.name} | (set() if op.clear else {op.dst.name}), {op.dst.name}, name
    regions = op.regions()
    reads = {r.name for r in regions} | _loads(op.encode())
    if "atomic" in op.op_name and regions:
        return reads, {regions[0].name}, name
    return reads, {r.name for r in regions}, name  # unknown op: everything read and written


def view_roots(body: Any) -> dict[str, str]:
    """``{view name: allocated buffer name}`` for every ``T.reshape`` / ``T.view`` in ``body``:
    an access of the view is an access of the buffer it views."""
    return {str(v.view.name): str(v.root.name) for v in whole_views(body)}


def statement_access(stmt: Any, roots: Mapping[str, str] | None = None) -> Access:
    """The buffers ``stmt`` reads and writes (tile ops by their operand roles).

    With ``roots`` (:func:`view_roots`), a view's accesses count as its buffer's, and a
    copy into a view is no producer: the ring that versions a buffer holds copies of the
    buffer, which a view of one stage does not address."""
    where = location_from_span(getattr(stmt, "span", None))
    if isinstance(stmt, tirx.Evaluate) and op_class_of(stmt.value) is not None:
        op = decode(stmt.value)
        reads, writes, what = _op_access(op)
        producer = None
        if isinstance(op, Copy) and is_shared_buffer(op.dst.buffer) and op.dst.name not in (roots or {}):
            src = op.src.buffer
            if not (is_shared_buffer(src) or is_fragment_buffer(src) or str(src.scope()).startswith("local")):
                producer = op.dst.name
        return _resolved(Access(reads, writes, what, where, producer), roots)
    reads, writes = set(), set()

    def on_eval(node: Any) -> None:
        if op_class_of(node.value) is not None:
            r, w, _ = _op_access(decode(node.value))
            reads.update(r)
            writes.update(w)

    tvm_ffi.structural_walk(
        stmt,
        [
            (tirx.BufferStore, lambda s: writes.add(str(s.buffer.name))),
            (ir.TensorLoad, lambda e: reads.add(str(e.source.name))),
            (tirx.Evaluate, on_eval),
        ],
    )
    return _resolved(Access(reads, writes, type(stmt).__name__, where), roots)


def _resolved(access: Access, roots: Mapping[str, str] | None) -> Access:
    if not roots:
        return access
    access.reads = {roots.get(name, name) for name in access.reads}
    access.writes = {roots.get(name, name) for name in access.writes}
    return access


def _conflict(a: Access, b: Access, ignore: set[str]) -> set[str]:
    shared = (a.writes & (b.reads | b.writes)) | (a.reads & b.writes)
    return shared - ignore


def versioned_buffers(body: list[Access]) -> set[str]:
    """Shared buffers written by exactly one statement, a producer copy."""
    out = set()
    for acc in body:
        if acc.producer is not None and sum(acc.producer in other.writes for other in body) == 1:
            out.add(acc.producer)
    return out


def violations(body: list[Access], stage: list[int], order: list[int]) -> list[tuple[int, int, set[str]]]:
    """Dependences ``(earlier, later, buffers)`` the assignment breaks."""
    versioned = versioned_buffers(body)
    bad = []
    for i in range(len(body)):
        for j in range(i + 1, len(body)):
            same_iter = _conflict(body[i], body[j], set())
            if same_iter and (stage[i], order[i]) >= (stage[j], order[j]):
                bad.append((i, j, same_iter))
            carried = _conflict(body[j], body[i], versioned)
            if carried and (stage[j], order[j]) >= (stage[i] + 1, order[i]):
                bad.append((j, i, carried))
    return bad


def auto_stages(body: list[Access], num_stages: int) -> list[int]:
    """Producer copies in stage 0, the rest in ``num_stages - 1``, raised until valid."""
    last = max(num_stages - 1, 0)
    versioned = versioned_buffers(body)
    stage = [0 if acc.producer in versioned else last for acc in body]
    order = list(range(len(body)))
    while True:
        bad = violations(body, stage, order)
        if not bad:
            return stage
        for earlier, later, _ in bad:  # `later` (maybe of the next iteration) must not overtake
            stage[later] = max(stage[later], stage[earlier])


def _body_statements(loop: Any) -> list[Any]:
    body = loop.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


def plan_loop(loop: Any, roots: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The pipeline annotations for one ``T.Pipelined`` loop (see module docstring);
    ``roots``: the function's :func:`view_roots`."""
    notes = {str(k): v for k, v in loop.annotations.items()}
    stmts = _body_statements(loop)
    body = [statement_access(s, roots) for s in stmts]
    num_stages = int(notes.get(NUM_STAGES, 0))
    where = location_from_span(loop.span)
    user_stage = _ints(notes[PIPELINE_STAGE]) if PIPELINE_STAGE in notes else None
    user_order = _ints(notes[PIPELINE_ORDER]) if PIPELINE_ORDER in notes else None
    for name, given in (("stage", user_stage), ("order", user_order)):
        if given is not None and len(given) != len(stmts):
            raise PipelinePlanError(
                f"T.Pipelined {name}= has {len(given)} entries but the loop body has {len(stmts)} statements",
                hint=f"give one {name} per statement of the loop body",
                location=where,
            )
    if user_order is not None and sorted(user_order) != list(range(len(stmts))):
        raise PipelinePlanError(
            f"T.Pipelined order={user_order} is not a permutation of 0..{len(stmts) - 1}",
            hint="order lists each body statement's position exactly once",
            location=where,
        )
    order = user_order if user_order is not None else list(range(len(stmts)))
    if user_stage is not None:
        stage = user_stage
        bad = violations(body, stage, order)
        if bad:
            first, second, buffers = bad[0]
            carried = first > second
            raise PipelinePlanError(
                f"T.Pipelined stage={stage}, order={order} breaks a dependence on "
                f"{', '.join(sorted(buffers))}: {body[second].describe(second)} "
                f"{'of the next iteration ' if carried else ''}would run before "
                f"{body[first].describe(first)}",
                hint="give the later statement a stage (or order) no earlier than the one it depends on, "
                "or leave stage=/order= out and let the compiler plan the pipeline",
                location=body[second].location or where,
            )
    elif user_order is not None:
        stage = [0] * len(stmts)
        bad = violations(body, stage, order)
        if bad:
            first, second, buffers = bad[0]
            raise PipelinePlanError(
                f"T.Pipelined order={order} runs {body[second].describe(second)} before "
                f"{body[first].describe(first)}, which it depends on through {', '.join(sorted(buffers))}",
                hint="keep dependent statements in their program order",
                location=body[second].location or where,
            )
    else:
        stage = auto_stages(body, num_stages)
    notes[PIPELINE_STAGE] = stage
    notes[PIPELINE_ORDER] = order
    notes[PIPELINE_VERSIONED] = sorted(versioned_buffers(body))
    return notes


def inline_bindings(body: Any) -> Any:
    """``body`` with its top-level scalar bindings (``k = n - 1 - kr``: a one-element local
    buffer declared in the body and stored once, or a ``Bind``) substituted into the
    statements after them and dropped.

    A declaration is a statement of its own whose scope is the rest of the body; a pipeline
    runs the body's statements at different steps, each for its own iteration, so each
    statement must compute the values it uses from the loop variable itself. A binding
    whose value loads a buffer the body writes stays where it is.
    """
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    writes = [statement_access(stmt).writes for stmt in stmts]
    written = set().union(*writes)
    declared = {
        str(s.buffer.name) for s in stmts if isinstance(s, tirx.AllocBuffer) and is_scalar_local(s.buffer)
    }
    stores = [str(s.buffer.name) for s in stmts if isinstance(s, tirx.BufferStore)]
    once = {n for n in declared if stores.count(n) == 1 and sum(n in w for w in writes) == 1}
    values: dict[str, Any] = {}  # buffer name or Bind var -> its value
    bound: list[tuple[Any, Any]] = []

    def substituted(node: Any) -> Any:
        def on_load(load: Any) -> Any:
            return values.get(str(load.source.name), load) if is_scalar_local(load.source) else load

        def on_var(var: Any) -> Any:
            return next((value for key, value in bound if var.same_as(key)), var)

        return tvm_ffi.structural_map(node, [(ir.TensorLoad, on_load), (ir.Var, on_var)])

    kept = []
    for stmt in stmts:
        value = substituted(stmt.value) if isinstance(stmt, tirx.Bind | tirx.BufferStore) else None
        if isinstance(stmt, tirx.Bind) and not (_loads(value) & written):
            bound.append((stmt.var, value))
        elif isinstance(stmt, tirx.AllocBuffer) and str(stmt.buffer.name) in once:
            continue
        elif isinstance(stmt, tirx.BufferStore) and str(stmt.buffer.name) in once:
            if _loads(value) & written:  # reads what the body writes: it stays, and so does its declaration
                return body
            values[str(stmt.buffer.name)] = value
        else:
            kept.append(substituted(stmt))
    if len(kept) == len(stmts):
        return body
    leftover = {str(s.buffer.name) for s in kept if isinstance(s, tirx.BufferStore)} & once
    if leftover or not kept:  # a store that stays needs its declaration: keep the body as written
        return body
    return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)


def hoist_declarations(loop: Any) -> tuple[list[Any], Any]:
    """The buffer declarations at the top of ``loop``'s body (``T.alloc_*`` written inside a
    ``T.Pipelined`` body), and the loop without them.

    A declaration's scope is the rest of the body, but a pipeline runs the body's statements
    apart (each at its own step): declared before the loop, the buffers stay in scope for
    every statement. Every iteration writes them before reading them, as in the body, and a
    shared one a producer copy fills is versioned like any other. A declaration whose shape
    uses the loop variable stays.
    """
    stmts = _body_statements(loop)

    def hoistable(stmt: Any) -> bool:
        return isinstance(stmt, tirx.AllocBuffer) and not mentions_var(list(stmt.buffer.shape), loop.loop_var)

    hoisted = [stmt for stmt in stmts if hoistable(stmt)]
    if not hoisted:
        return [], loop
    kept = [stmt for stmt in stmts if not hoistable(stmt)]
    return hoisted, loop_over(loop, kept[0] if len(kept) == 1 else tirx.SeqStmt(kept))


def _plan_func(func: Any) -> Any:
    """Plan (or check the user's) stages and order of every pipelined loop."""
    roots = view_roots(func.body)

    def on_for(loop: Any, m: Any) -> Any:
        body = m.mutate(loop.body)
        if not has_annotation(loop, PIPELINED_LOOP):
            return loop_over(loop, body)
        declared, loop = hoist_declarations(loop_over(loop, inline_bindings(body)))
        planned = loop_over(loop, loop.body, plan_loop(loop, roots))
        return tirx.SeqStmt([*declared, planned]) if declared else planned

    return func.with_body(mutate(func.body, [(tirx.For, on_for)]))


PLAN_PIPELINE = function_pass(
    _plan_func, name="plan_pipeline", needs={TILE_OPS, PIPELINED_LOOPS}, guarantees={PIPELINE_PLANNED}
)
plan_pipeline = PLAN_PIPELINE.run
