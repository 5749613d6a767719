"""The asynchronous-copy ring behind ``T.Pipelined``, for any copy engine.

A vendor's copy engine (CUDA's ``cp.async`` groups, ROCm's LDS DMA waited for with
``s_waitcnt vmcnt``) fills multi-buffered shared memory while the block computes on an
older copy. The schedule is the same for every engine; only a few statements differ,
and a :class:`RingSync` supplies them.

:func:`mark_pipelined_loops`. Needs: pipelined loops planned by ``plan_pipeline``.
Guarantees: each statement ``i`` of such a loop's body sits in an ``AttrStmt`` keyed
``tile.pipeline_statement`` (value ``i``), so the statements stay separable after
lowering (which flattens their bodies), and every producer copy (global -> a versioned
shared buffer) sits in one keyed ``tile.async_copy``. Run it before ``lower_tile_ops``.

:func:`pipeline_rings`. Needs: the marks above. Guarantees: a loop that can be pipelined
becomes one serial loop over pipeline *steps* ``p`` in ``[0, n + L)`` (``L`` the largest
stage): statement ``s`` runs for iteration ``p - stage[s]`` when that is in ``[0, n)``,
ordered inside a step by ``order``; each versioned buffer gets a leading dim of
``num_stages`` copies, iteration ``k`` using copy ``k % num_stages`` (loads, stores and the
offsets of ``tvm_access_ptr`` spans are remapped); after the step's last producer copy
the sync's ``commit`` closes the step's copies (every step commits exactly once), and each
step starts with the sync's ``wait`` for the copies of iteration ``p - c`` (``c`` the
smallest consumer stage), its ``after_wait`` statements and a barrier, which also keeps a
copy from overwriting a buffer copy that another warp still reads. Loops that cannot be
pipelined (one stage, a constant trip count of one, a producer outside stage 0, a
consumer ``num_stages`` or more steps behind, a versioned buffer used outside the loop,
producers the sync does not accept) only lose the marks; the producer marks of rings stay
for the vendor's copy lowering (``tile.async_copy``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..annotations import (
    NUM_STAGES,
    PIPELINE_ORDER,
    PIPELINE_STAGE,
    PIPELINE_VERSIONED,
    PIPELINED_LOOP,
)
from ..transform import CompileContext, Pass, Property, map_prim_funcs
from ..transform._traverse import moved_accesses, moved_pointers
from ..transform.plan_pipeline import statement_access
from ..transform.properties import PIPELINE_PLANNED, TILE_OPS
from .statements import seq, shared_barrier

PIPELINE_STATEMENT = "tile.pipeline_statement"
ASYNC_COPY = "tile.async_copy"
_PIPELINE_KEYS = (PIPELINED_LOOP, NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINE_VERSIONED)


def loop_notes(loop: Any) -> dict[str, Any]:
    return {} if loop.annotations is None else {str(k): v for k, v in loop.annotations.items()}


def is_pipelined(loop: Any) -> bool:
    return PIPELINED_LOOP in loop_notes(loop)


def _attr(key: str, value: int, body: Any) -> Any:
    return tirx.AttrStmt(ir.StringImm(key), key, tirx.const(value, "int32"), body)


def body_statements(loop: Any) -> list[Any]:
    return list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]


# --------------------------------------------------------------------------- pass 1: marks
def _mark_loop(loop: Any) -> Any:
    notes = loop_notes(loop)
    if int(notes.get(NUM_STAGES, 0)) < 2 or PIPELINE_STAGE not in notes:
        return loop
    versioned = {str(n) for n in notes.get(PIPELINE_VERSIONED, [])}
    marked = []
    for index, stmt in enumerate(body_statements(loop)):
        if statement_access(stmt).producer in versioned:
            stmt = _attr(ASYNC_COPY, 1, stmt)
        marked.append(_attr(PIPELINE_STATEMENT, index, stmt))
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, seq(marked), loop.thread_binding,
                    loop.annotations, span=loop.span)  # fmt: skip


def mark_pipelined_loops(mod: Any) -> Any:
    """Wrap the statements of pipelined loops and their producer copies (see module docstring)."""

    def on_for(loop: Any) -> Any:
        return _mark_loop(loop) if is_pipelined(loop) else loop

    return map_prim_funcs(mod, lambda f: f.with_body(tvm_ffi.structural_map(f.body, (tirx.For, on_for))))


def ring_marking_pass(name: str, ring_on: Callable[[CompileContext], bool], marked: Property) -> Pass:
    """A vendor's pass (before ``lower_tile_ops``) that marks the statements of planned pipelined
    loops (``mark_pipelined_loops``) where its ring is on (``ring_on(ctx)``), guaranteeing ``marked``.

    Example::

        MARKED = Property("my_ring_marked", "pipelined loops' statements are marked")
        MARK_MY_RING = ring_marking_pass("mark_my_ring", lambda ctx: True, MARKED)
    """

    def mark(mod: Any, ctx: CompileContext) -> Any:
        return mark_pipelined_loops(mod) if ring_on(ctx) else mod

    return Pass(name, mark, needs={PIPELINE_PLANNED, TILE_OPS}, guarantees={marked})


def _strip_marks(stmt: Any, keys: Sequence[str]) -> Any:
    def on_attr(node: Any) -> Any:
        return node.body if str(node.attr_key) in keys else node

    return tvm_ffi.structural_map(stmt, (tirx.AttrStmt, on_attr))


def buffer_uses(stmt: Any) -> set[Any]:
    """Buffer variables ``stmt`` accesses (loads, stores, ``buffer_data``; not allocations)."""
    found: list[Any] = []

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.buffer_data":
            found.append(call.args[0])

    tvm_ffi.structural_walk(
        stmt,
        [
            (tirx.BufferStore, lambda node: found.append(node.buffer)),
            (ir.TensorLoad, lambda node: found.append(node.source)),
            (ir.Call, on_call),
        ],
    )
    return set(found)


def _buffers_named(stmt: Any, names: set[str]) -> dict[str, Any]:
    return {str(v.name): v for v in buffer_uses(stmt) if str(v.name) in names}


@dataclasses.dataclass
class Ring:
    """The multi-buffered copies of the versioned buffers of one loop."""

    old: dict[str, Any]  # name -> original buffer
    new: dict[str, Any]  # name -> buffer with a leading copies dim
    copies: int

    def remap(self, stmt: Any, version: Any) -> Any:
        """``stmt`` with every access to a versioned buffer moved into copy ``version``."""

        def which(buffer: Any) -> str | None:
            for name, old in self.old.items():
                if buffer.same_as(old):
                    return name
            return None

        def to_copy(buffer: Any, indices: list[Any]) -> tuple[Any, list[Any]] | None:
            name = which(buffer)
            return None if name is None else (self.new[name], [version, *indices])

        def pointer_to_copy(buffer: Any, offset: Any) -> tuple[Any, Any] | None:
            name = which(buffer)
            if name is None:
                return None
            return self.new[name], offset + version * math.prod(int(d) for d in self.old[name].shape)

        return tvm_ffi.structural_mutate(stmt, [*moved_accesses(to_copy), *moved_pointers(pointer_to_copy)])


def versioned_ring(loop: Any, outside: set[Any], copies: int) -> Ring | None:
    notes = loop_notes(loop)
    names = {str(n) for n in notes.get(PIPELINE_VERSIONED, [])}
    old = _buffers_named(loop.body, names)
    if set(old) != names or any(b in outside for b in old.values()):
        return None
    new = {}
    for name, buffer in old.items():
        if any(not isinstance(d, tirx.IntImm) for d in buffer.shape):
            return None
        new[name] = tirx.decl_buffer(
            (copies, *buffer.shape), str(buffer.dtype), name=name, scope=str(buffer.scope())
        )
    return Ring(old, new, copies)


def substitute(stmt: Any, var: Any, value: Any) -> Any:
    return tvm_ffi.structural_map(stmt, (ir.Var, lambda v: value if v.same_as(var) else v))


class RingSync:
    """How a ring's statements wait for its copies: the few statements that differ between
    asynchronous copy engines (CUDA's ``CpAsyncSync``: commit/wait groups; ROCm's
    ``VmcntSync``: ``s_waitcnt vmcnt``, which counts instructions rather than groups).

    :func:`pipeline_rings` builds the schedule and asks the sync for these statements.
    """

    def accepts(self, producers: Sequence[Any]) -> bool:
        """Whether a loop whose producer statements (lowered, still marked) are these gets a ring."""
        return True

    def producer(self, stmt: Any) -> Any:
        """A producer statement as the ring issues it (by default as it is, its mark kept for
        the vendor's copy lowering)."""
        return stmt

    def commit(self) -> list[Any]:
        """Closes the copies issued so far into one group (after a step's last producer)."""
        raise NotImplementedError(f"{type(self).__name__} must say how a ring commits its copies")

    def wait(self, pending: int, newest: Any, trips: Any) -> list[Any]:
        """Waits until at most ``pending`` groups are in flight.

        ``newest`` is the (0-based) iteration whose copies were committed last, when the
        wait runs inside the ring (``None`` after it), and ``trips`` the loop's trip count:
        a flavour that counts instructions needs them to know which groups were issued.
        """
        raise NotImplementedError(f"{type(self).__name__} must say how a ring waits for its copies")

    def after_wait(self) -> list[Any]:
        """Statements after each wait inside the ring, before its barrier (none by default;
        CUDA's sm_90+ ring fences the async proxy there, as wgmma reads through it)."""
        return []


def _pipeline_loop(loop: Any, outside: set[Any], rings: list[Ring], sync: RingSync) -> Any:
    """The ring for one marked loop (or the loop without marks if it cannot be pipelined)."""
    notes = loop_notes(loop)
    body = body_statements(loop)
    plain = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                     _strip_marks(loop.body, (PIPELINE_STATEMENT, ASYNC_COPY)), loop.thread_binding,
                     loop.annotations, span=loop.span)  # fmt: skip
    if not body or any(
        not (isinstance(s, tirx.AttrStmt) and str(s.attr_key) == PIPELINE_STATEMENT) for s in body
    ):
        return plain
    stmts = [s.body for s in body]
    stage = [int(v) for v in notes[PIPELINE_STAGE]]
    order = [int(v) for v in notes[PIPELINE_ORDER]]
    copies = int(notes[NUM_STAGES])
    trips = int(loop.extent.value) if isinstance(loop.extent, tirx.IntImm) else None
    if trips is not None and trips >= 2 and max(stage) > trips - 1:
        # A ring deeper than the loop runs (3 stages over 2 steps) has no steady state, and
        # its guards pin the step to single values (see below): it gets as deep as the loop
        stage = [min(s, trips - 1) for s in stage]
        copies = min(copies, trips)
    producers = [
        i for i, s in enumerate(stmts) if isinstance(s, tirx.AttrStmt) and str(s.attr_key) == ASYNC_COPY
    ]
    ring = versioned_ring(loop, outside, copies)
    if ring is None or not producers or any(stage[i] != 0 for i in producers):
        return plain
    if not sync.accepts([stmts[i] for i in producers]):
        return plain
    versioned = set(ring.old.values())
    consumers = [i for i in range(len(stmts)) if i not in producers and buffer_uses(stmts[i]) & versioned]
    last = max(stage)
    if last == 0 or any(stage[i] >= copies for i in consumers):
        return plain
    if isinstance(loop.extent, tirx.IntImm) and int(loop.extent.value) <= 1:
        # One iteration has nothing to overlap. A ring would guard each statement by a
        # condition that pins the step to one value (``step < 1``, ``step - 1 >= 0``), and
        # TVM's CompactBufferAllocation then sizes the ring buffers by an expression in the
        # step variable, outside its loop (codegen: "k_step used before definition").
        return plain

    step = tirx.Var(f"{loop.loop_var.name}_step", str(loop.loop_var.ty))
    n = loop.extent
    analyzer = tvm.sym.Analyzer()
    analyzer.bind(step, ir.Range(0, n + last))
    positive = sorted({stage[i] for i in consumers if stage[i] > 0})
    head: list[Any] = []
    covered = None  # the smallest consumer stage whose data this step already waited for
    if positive:
        head += sync.wait(positive[0] - 1, step - 1, n)
        covered = positive[0]
    head += sync.after_wait()
    head.append(shared_barrier())
    out = list(head)
    last_producer = max(producers, key=lambda i: order[i])
    committed = False
    for s in sorted(range(len(stmts)), key=lambda i: order[i]):
        if s in consumers and (covered is None or stage[s] < covered):
            if not committed:
                out += sync.commit()
                committed = True
            out += sync.wait(stage[s], step, n)
            out += sync.after_wait()
            out += [shared_barrier()]
            covered = stage[s]
        relative = step - stage[s]
        iteration = loop.min + relative
        issued = sync.producer(stmts[s]) if s in producers else stmts[s]
        inner = ring.remap(issued, tirx.floormod(relative, copies))
        inner = substitute(inner, loop.loop_var, iteration)
        guards = [relative >= 0, relative < n]
        conds = [g for g in guards if not analyzer.can_prove(g)]
        if conds:
            cond = conds[0] if len(conds) == 1 else tirx.And(conds[0], conds[1])
            # The guard tests the step only, the same on every thread; saying so lets TVM's
            # ThreadSync place a barrier a consumer writing shared memory needs inside it
            # (it refuses "to insert syncs inside condition" otherwise).
            inner = tirx.IfThenElse(tirx.call_intrin("bool", "tirx.tvm_thread_invariant", cond), inner, None)
        out.append(inner)
        if s == last_producer:
            out += sync.commit()
            committed = True
    kept = {k: v for k, v in notes.items() if k not in _PIPELINE_KEYS}
    rings.append(ring)
    ring_loop = tirx.For(step, 0, n + last, tirx.ForKind.SERIAL, tirx.SeqStmt(out), None, kept or None,
                         span=loop.span)  # fmt: skip
    # Drain: nothing is in flight once the loop ends, and the buffers may be reused.
    return tirx.SeqStmt([ring_loop, *sync.wait(0, None, n), shared_barrier()])


def _pipeline_func(func: Any, sync: RingSync) -> Any:
    loops: list[Any] = []

    def find(loop: Any) -> None:
        stmts = body_statements(loop)
        marked = (isinstance(s, tirx.AttrStmt) and str(s.attr_key) == PIPELINE_STATEMENT for s in stmts)
        if is_pipelined(loop) and any(marked):
            loops.append(loop)

    tvm_ffi.structural_walk(func.body, (tirx.For, find))
    if not loops:
        return func
    rings: list[Ring] = []

    def on_for(loop: Any) -> Any:
        if not any(loop.same_as(m) for m in loops):
            return loop
        without = tvm_ffi.structural_map(
            func.body, (tirx.For, lambda other: tirx.Evaluate(0) if other.same_as(loop) else other)
        )
        return _pipeline_loop(loop, buffer_uses(without), rings, sync)

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for))
    replaced = {old: ring.new[name] for ring in rings for name, old in ring.old.items()}

    def on_alloc(node: Any) -> Any:
        for old, new in replaced.items():
            if node.buffer.same_as(old):
                return tirx.AllocBuffer(new, node.annotations)
        return node

    return func.with_body(tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc)))


def pipeline_rings(mod: Any, sync: RingSync) -> Any:
    """Turn marked pipelined loops into rings waited for with ``sync`` (see module docstring).

    Example (a vendor pass)::

        def pipeline_my_rings(mod, ctx):
            return pipeline_rings(mod, MySync())
    """
    return map_prim_funcs(mod, lambda f: _pipeline_func(f, sync))
