"""``T.Pipelined`` on sm_80+: ``cp.async`` rings with commit/wait groups.

Three passes, placed around the generic passes in the backend's pipeline list
(``backend.SM80_PIPELINE``, ``backend.SM90A_PIPELINE``):

``mark_pipeline_statements`` (before ``lower_tile_ops``). Needs: pipelined loops
planned by ``plan_pipeline``. Guarantees: each statement ``i`` of such a loop's body
sits in an ``AttrStmt`` keyed ``tile.pipeline_statement`` (value ``i``), so the
statements stay separable after lowering (which flattens their bodies), and every
producer copy (global -> a versioned shared buffer) sits in one keyed
``tile.async_copy``.

``pipeline_async_copies`` (before ``serialize_pipelined_loops``). Needs: the marks
above. Guarantees: a loop that can be pipelined becomes one serial loop over
pipeline *steps* ``p`` in ``[0, n + L)`` (``L`` the largest stage): statement ``s``
runs for iteration ``p - stage[s]`` when that is in ``[0, n)``, ordered inside a
step by ``order``; each versioned buffer gets a leading dim of ``num_stages``
copies, iteration ``k`` using copy ``k % num_stages`` (loads, stores and the
offsets of ``tvm_access_ptr`` spans are remapped); after the step's last producer
copy the thread commits one cp.async group (an empty group when the copies are
skipped, so every step commits exactly one), and each step starts with
``wait_group(c - 1)`` (``c`` the smallest consumer stage: the group of iteration
``p - c`` is then complete; on sm_90+ a ``fence.proxy.async`` follows, as wgmma
reads shared memory through the async proxy) and a barrier, which also keeps a copy from
overwriting a buffer copy that another warp still reads. Loops that cannot be
pipelined (one stage, a constant trip count of one, a producer outside stage 0, a
consumer ``num_stages`` or more steps behind, a versioned buffer used outside the
loop) only lose the marks.

``lower_async_copies`` (last). Needs: bound, vectorized loops. Guarantees: inside
``tile.async_copy`` marks, a vectorized store ``shared[.. + v] = global[.. + v]``
of 4, 8 or 16 bytes becomes ``tile_cp_async_{4,8,16}`` (``tile_cuda/async.h``);
one whose value is ``if_then_else(cond, load, 0)`` with ``cond`` the same for the
whole vector becomes the ``_zfill`` form reading 0 bytes when ``cond`` fails.
Anything else stays a plain store, which the barriers above still order. No
mark is left.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.annotations import (
    NUM_STAGES,
    PIPELINE_ORDER,
    PIPELINE_STAGE,
    PIPELINE_VERSIONED,
    PIPELINED_LOOP,
)
from tile.ir.target import Target
from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs
from tile.ir.transform.plan_pipeline import statement_access
from tile.ir.transform.properties import (
    PARALLEL_LOOPS_SCHEDULED,
    PIPELINE_PLANNED,
    PIPELINED_LOOPS,
    SHARED_LAYOUTS_APPLIED,
    TILE_OPS,
    TILE_OPS_LOWERED,
    statements_without,
)
from tile.layout import dtype_bits

from ..arch import capabilities, parse_arch
from ..errors import CudaArchError

PIPELINE_STATEMENT = "tile.pipeline_statement"
ASYNC_COPY = "tile.async_copy"
_PIPELINE_KEYS = (PIPELINED_LOOP, NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINE_VERSIONED)


def _notes(loop: Any) -> dict[str, Any]:
    return {} if loop.annotations is None else {str(k): v for k, v in loop.annotations.items()}


def _is_pipelined(loop: Any) -> bool:
    return PIPELINED_LOOP in _notes(loop)


def _attr(key: str, value: int, body: Any) -> Any:
    return tirx.AttrStmt(ir.StringImm(key), key, tirx.const(value, "int32"), body)


def _seq(stmts: Sequence[Any]) -> Any:
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(list(stmts))


def _extern(name: str, *args: Any) -> Any:
    return tirx.Evaluate(tirx.call_extern("void", name, *args))


def _barrier() -> Any:
    return tirx.Evaluate(tirx.op.tvm_storage_sync("shared"))


def _body_list(loop: Any) -> list[Any]:
    return list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]


# --------------------------------------------------------------------------- pass 1: marks
def _mark_loop(loop: Any) -> Any:
    notes = _notes(loop)
    if int(notes.get(NUM_STAGES, 0)) < 2 or PIPELINE_STAGE not in notes:
        return loop
    versioned = {str(n) for n in notes.get(PIPELINE_VERSIONED, [])}
    marked = []
    for index, stmt in enumerate(_body_list(loop)):
        if statement_access(stmt).producer in versioned:
            stmt = _attr(ASYNC_COPY, 1, stmt)
        marked.append(_attr(PIPELINE_STATEMENT, index, stmt))
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, _seq(marked), loop.thread_binding,
                    loop.annotations, span=loop.span)  # fmt: skip


def mark_pipelined_loops(mod: Any) -> Any:
    """The marks of ``mark_pipeline_statements``, whatever the target (another backend's ring)."""

    def on_for(loop: Any) -> Any:
        return _mark_loop(loop) if _is_pipelined(loop) else loop

    return map_prim_funcs(mod, lambda f: f.with_body(tvm_ffi.structural_map(f.body, (tirx.For, on_for))))


def mark_pipeline_statements(mod: Any, ctx: CompileContext) -> Any:
    """Wrap the statements of pipelined loops (see module docstring)."""
    if not ctx.capabilities.async_copy:
        return mod
    return mark_pipelined_loops(mod)


PIPELINE_STATEMENTS_MARKED = Property(
    "pipeline_statements_marked",
    "every statement of a planned pipelined loop is marked (tile.pipeline_statement, tile.async_copy)",
)
MARK_PIPELINE_STATEMENTS = Pass(
    "mark_pipeline_statements",
    mark_pipeline_statements,
    needs={PIPELINE_PLANNED, TILE_OPS},
    guarantees={PIPELINE_STATEMENTS_MARKED},
)


# --------------------------------------------------------------------------- pass 2: the ring
def _strip_marks(stmt: Any, keys: Sequence[str]) -> Any:
    def on_attr(node: Any) -> Any:
        return node.body if str(node.attr_key) in keys else node

    return tvm_ffi.structural_map(stmt, (tirx.AttrStmt, on_attr))


def _uses(stmt: Any) -> set[Any]:
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
    return {str(v.name): v for v in _uses(stmt) if str(v.name) in names}


@dataclasses.dataclass
class _Ring:
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

        def on_store(node: Any) -> Any:
            name = which(node.buffer)
            if name is None:
                return node
            return tirx.BufferStore(self.new[name], node.value, [version, *node.indices])

        def on_load(node: Any) -> Any:
            name = which(node.source)
            if name is None:
                return node
            return tirx.BufferLoad(self.new[name], [version, *node.indices])

        def on_call(call: Any) -> Any:
            if not isinstance(call.op, ir.Op) or str(call.op.name) != "tirx.tvm_access_ptr":
                return call
            data = call.args[1]
            if not (isinstance(data, ir.Call) and str(data.op.name) == "tirx.buffer_data"):
                return call
            name = which(data.args[0])
            if name is None:
                return call
            numel = math.prod(int(d) for d in self.old[name].shape)
            args = list(call.args)
            args[1] = self.new[name].data
            args[2] = args[2] + version * numel
            return ir.Call(call.op, args, span=call.span, ret_ty=call.ty)

        return tvm_ffi.structural_map(
            stmt, [(tirx.BufferStore, on_store), (ir.TensorLoad, on_load), (ir.Call, on_call)]
        )


def _ring(loop: Any, outside: set[Any], copies: int) -> _Ring | None:
    notes = _notes(loop)
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
    return _Ring(old, new, copies)


def _substitute(stmt: Any, var: Any, value: Any) -> Any:
    return tvm_ffi.structural_map(stmt, (ir.Var, lambda v: value if v.same_as(var) else v))


def _wait(pending: int) -> Any:
    return _extern(f"tile_cp_async_wait<{pending}>")


class RingSync:
    """How a ring's statements wait for its copies: cp.async groups (this class).

    ``_pipeline_loop`` builds the schedule; the flavour supplies the few statements that
    differ between asynchronous copy engines. ROCm's LDS DMA ring (``tile.backends.rocm``,
    ``lds_ring.py``) overrides them for ``s_waitcnt vmcnt``, which counts instructions
    rather than groups.
    """

    fence_async_proxy = False
    """sm_90+: a ``fence.proxy.async`` after each wait (wgmma reads through the async proxy)."""

    def accepts(self, producers: Sequence[Any]) -> bool:
        """Whether a loop whose producer statements (lowered, still marked) are these gets a ring."""
        return True

    def producer(self, stmt: Any) -> Any:
        """A producer statement as the ring issues it (cp.async: as it is; the mark stays for
        ``lower_async_copies``)."""
        return stmt

    def commit(self) -> list[Any]:
        """Closes the copies issued so far into one group (after a step's last producer)."""
        return [_extern("tile_cp_async_commit")]

    def wait(self, pending: int, newest: Any, trips: Any) -> list[Any]:
        """Waits until at most ``pending`` groups are in flight.

        ``newest`` is the (0-based) iteration whose copies were committed last, when the
        wait runs inside the ring (``None`` after it), and ``trips`` the loop's trip count:
        a flavour that counts instructions needs them to know which groups were issued.
        """
        return [_wait(pending)]


class CpAsyncSync(RingSync):
    """cp.async commit/wait_group; on sm_90+ with ``fence.proxy.async`` after each wait."""

    def __init__(self, fence_async_proxy: bool = False) -> None:
        self.fence_async_proxy = fence_async_proxy


def _pipeline_loop(loop: Any, outside: set[Any], rings: list[_Ring], sync: RingSync) -> Any:
    """The ring for one marked loop (or the loop without marks if it cannot be pipelined)."""
    notes = _notes(loop)
    body = _body_list(loop)
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
    ring = _ring(loop, outside, copies)
    if ring is None or not producers or any(stage[i] != 0 for i in producers):
        return plain
    if not sync.accepts([stmts[i] for i in producers]):
        return plain
    versioned = set(ring.old.values())
    consumers = [i for i in range(len(stmts)) if i not in producers and _uses(stmts[i]) & versioned]
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
    if sync.fence_async_proxy:  # the copies are read by wgmma, which goes through the async proxy
        head.append(_extern("tile_fence_proxy_async"))
    head.append(_barrier())
    out = list(head)
    last_producer = max(producers, key=lambda i: order[i])
    committed = False
    for s in sorted(range(len(stmts)), key=lambda i: order[i]):
        if s in consumers and (covered is None or stage[s] < covered):
            if not committed:
                out += sync.commit()
                committed = True
            out += sync.wait(stage[s], step, n)
            out += [_extern("tile_fence_proxy_async")] if sync.fence_async_proxy else []
            out += [_barrier()]
            covered = stage[s]
        relative = step - stage[s]
        iteration = loop.min + relative
        issued = sync.producer(stmts[s]) if s in producers else stmts[s]
        inner = ring.remap(issued, tirx.floormod(relative, copies))
        inner = _substitute(inner, loop.loop_var, iteration)
        guards = [relative >= 0, relative < n]
        conds = [g for g in guards if not analyzer.can_prove(g)]
        if conds:
            cond = conds[0] if len(conds) == 1 else tirx.And(conds[0], conds[1])
            inner = tirx.IfThenElse(cond, inner, None)
        out.append(inner)
        if s == last_producer:
            out += sync.commit()
            committed = True
    kept = {k: v for k, v in notes.items() if k not in _PIPELINE_KEYS}
    rings.append(ring)
    ring_loop = tirx.For(step, 0, n + last, tirx.ForKind.SERIAL, tirx.SeqStmt(out), None, kept or None,
                         span=loop.span)  # fmt: skip
    # Drain: nothing is in flight once the loop ends, and the buffers may be reused.
    return tirx.SeqStmt([ring_loop, *sync.wait(0, None, n), _barrier()])


def _pipeline_func(func: Any, sync: RingSync) -> Any:
    loops: list[Any] = []

    def find(loop: Any) -> None:
        if _is_pipelined(loop) and any(
            isinstance(s, tirx.AttrStmt) and str(s.attr_key) == PIPELINE_STATEMENT for s in _body_list(loop)
        ):
            loops.append(loop)

    tvm_ffi.structural_walk(func.body, (tirx.For, find))
    if not loops:
        return func
    rings: list[_Ring] = []

    def on_for(loop: Any) -> Any:
        if not any(loop.same_as(m) for m in loops):
            return loop
        without = tvm_ffi.structural_map(
            func.body, (tirx.For, lambda other: tirx.Evaluate(0) if other.same_as(loop) else other)
        )
        return _pipeline_loop(loop, _uses(without), rings, sync)

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for))
    replaced = {old: ring.new[name] for ring in rings for name, old in ring.old.items()}

    def on_alloc(node: Any) -> Any:
        for old, new in replaced.items():
            if node.buffer.same_as(old):
                return tirx.AllocBuffer(new, node.annotations)
        return node

    return func.with_body(tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc)))


def pipeline_rings(mod: Any, sync: RingSync) -> Any:
    """The rings of ``pipeline_async_copies`` with ``sync``'s waits, whatever the target."""
    return map_prim_funcs(mod, lambda f: _pipeline_func(f, sync))


def pipeline_async_copies(mod: Any, ctx: CompileContext) -> Any:
    """Turn marked pipelined loops into cp.async rings (see module docstring)."""
    if not ctx.capabilities.async_copy:
        return mod
    return pipeline_rings(mod, CpAsyncSync(_has_async_proxy(ctx.target)))


def _has_async_proxy(target: Target) -> bool:
    """sm_90+: shared memory the ring fills may be read by wgmma/TMA (the async proxy)."""
    try:
        return target.arch is not None and bool(capabilities(parse_arch(target.arch).name).tma)
    except CudaArchError:
        return False


ASYNC_COPY_RINGS = Property(
    "async_copy_rings", "pipelinable marked loops are cp.async rings over pipeline steps"
)
PIPELINE_ASYNC_COPIES = Pass(
    "pipeline_async_copies",
    pipeline_async_copies,
    needs={PIPELINE_STATEMENTS_MARKED, TILE_OPS_LOWERED, PIPELINED_LOOPS},
    guarantees={ASYNC_COPY_RINGS},
)


# --------------------------------------------------------------------------- pass 3: cp.async
def _linear_in(expr: Any, var: Any, analyzer: Any) -> bool:
    """``expr`` is ``base + var`` (unit stride in ``var``)."""
    at0 = tvm_ffi.structural_map(expr, (ir.Var, lambda v: tirx.const(0, v.ty) if v.same_as(var) else v))
    diff = analyzer.simplify(expr - at0 - var)
    return isinstance(diff, tirx.IntImm) and int(diff.value) == 0


def _mentions(expr: Any, var: Any) -> bool:
    found: list[bool] = []
    tvm_ffi.structural_walk(expr, (ir.Var, lambda v: found.append(True) if v.same_as(var) else None))
    return bool(found)


def _at_zero(expr: Any, var: Any) -> Any:
    return tvm_ffi.structural_map(expr, (ir.Var, lambda v: tirx.const(0, v.ty) if v.same_as(var) else v))


def _conjuncts(cond: Any) -> list[Any]:
    if type(cond).__name__ == "And":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _uniform_condition(cond: Any, var: Any, lanes: int, analyzer: Any) -> Any | None:
    """``cond`` for the whole vector (its value at ``var = 0``), if every lane agrees.

    A conjunct ``x < b`` with ``x = base + var`` holds for all lanes exactly when it
    holds for lane 0 if ``base`` and ``b`` are multiples of ``lanes`` (a tile edge
    that does not cut a vector). Other conjuncts must not mention ``var``.
    """
    for part in _conjuncts(cond):
        if not _mentions(part, var):
            continue
        if type(part).__name__ != "LT":
            return None
        base = _at_zero(part.a, var)
        ok = _linear_in(part.a, var, analyzer)
        ok = ok and analyzer.can_prove(tirx.floormod(base, lanes) == 0)
        ok = ok and not _mentions(part.b, var) and analyzer.can_prove(tirx.floormod(part.b, lanes) == 0)
        if not ok:
            return None
    return _at_zero(cond, var)


def _copy_call(loop: Any, analyzer: Any) -> Any | None:
    """The cp.async call for a vectorized ``shared[...] = global[...]`` loop, or None."""
    store = loop.body
    if loop.kind != tirx.ForKind.VECTORIZED or not isinstance(store, tirx.BufferStore):
        return None
    if not isinstance(loop.extent, tirx.IntImm):
        return None
    lanes, var = int(loop.extent.value), loop.loop_var
    analyzer = tvm.sym.Analyzer()  # knows the lane range (swizzled indices split on it)
    analyzer.bind(var, ir.Range(0, lanes))
    dst = store.buffer
    if not str(dst.scope()).startswith("shared"):
        return None
    value, cond = store.value, None
    if isinstance(value, ir.Call) and str(value.op.name).endswith("if_then_else"):
        cond, value, other = value.args
        if not (isinstance(other, tirx.FloatImm | tirx.IntImm) and float(other.value) == 0.0):
            return None
        cond = _uniform_condition(cond, var, lanes, analyzer)
        if cond is None:
            return None
    if not isinstance(value, ir.TensorLoad):
        return None
    src = value.source
    if str(src.scope()) not in ("", "global") or str(src.dtype) != str(dst.dtype):
        return None
    nbytes = lanes * dtype_bits(str(dst.dtype)) // 8
    if nbytes not in (4, 8, 16):
        return None
    for buffer, indices in ((dst, store.indices), (src, value.indices)):
        flat: Any = tirx.const(0, "int32")
        for index, dim in zip(indices, buffer.shape, strict=True):
            flat = flat * dim + index
        if not _linear_in(flat, var, analyzer):  # consecutive lanes, consecutive elements
            return None
    dst_ptr = tirx.address_of(tirx.BufferLoad(dst, [_at_zero(i, var) for i in store.indices]))
    src_at = [_at_zero(i, var) for i in value.indices]
    if cond is None:
        return _extern(f"tile_cp_async_{nbytes}", dst_ptr, tirx.address_of(tirx.BufferLoad(src, src_at)))
    # Out of bounds: read 0 bytes from the (valid) first element, zero the destination.
    origin = [tirx.const(0, "int32") for _ in src_at]
    safe = [tirx.if_then_else(cond, i, o) for i, o in zip(src_at, origin, strict=True)]
    size = tirx.if_then_else(cond, tirx.const(nbytes, "int32"), tirx.const(0, "int32"))
    return _extern(
        f"tile_cp_async_zfill_{nbytes}", dst_ptr, tirx.address_of(tirx.BufferLoad(src, safe)), size
    )


def _lower_copies_func(func: Any) -> Any:
    analyzer = tvm.sym.Analyzer()

    def on_attr(node: Any) -> Any:
        key = str(node.attr_key)
        if key == PIPELINE_STATEMENT:
            return node.body
        if key != ASYNC_COPY:
            return node

        def on_for(loop: Any) -> Any:
            call = _copy_call(loop, analyzer)
            return loop if call is None else call

        return tvm_ffi.structural_map(node.body, (tirx.For, on_for))

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr)))


def lower_async_copies(mod: Any, ctx: CompileContext) -> Any:
    """Vectorized producer copies inside ``tile.async_copy`` marks become cp.async."""
    return map_prim_funcs(mod, _lower_copies_func)


ASYNC_COPIES_LOWERED = Property(
    "async_copies_lowered",
    "marked vectorized producer copies are tile_cp_async calls; no mark is left",
    check=statements_without(ASYNC_COPY, PIPELINE_STATEMENT),
)
LOWER_ASYNC_COPIES = Pass(
    "lower_async_copies",
    lower_async_copies,
    needs={PARALLEL_LOOPS_SCHEDULED, SHARED_LAYOUTS_APPLIED},
    guarantees={ASYNC_COPIES_LOWERED},
)


__all__ = [
    "ASYNC_COPIES_LOWERED",
    "ASYNC_COPY",
    "ASYNC_COPY_RINGS",
    "LOWER_ASYNC_COPIES",
    "MARK_PIPELINE_STATEMENTS",
    "PIPELINE_ASYNC_COPIES",
    "PIPELINE_STATEMENT",
    "PIPELINE_STATEMENTS_MARKED",
    "CpAsyncSync",
    "RingSync",
    "lower_async_copies",
    "mark_pipeline_statements",
    "mark_pipelined_loops",
    "pipeline_async_copies",
    "pipeline_rings",
]
