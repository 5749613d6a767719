"""Block barriers between shared-memory producers and consumers, planned by tile.

Needs: a lowered GPU kernel (thread bindings as ``thread_extent`` attributes, shared
buffers in scope ``shared`` / ``shared.dyn``), before TVM's default TIR pipeline.
Guarantees: a ``tvm_storage_sync`` before every statement that would otherwise race with
an earlier access of another thread to the same shared memory (read after write, write
after read, write after write, also across loop iterations); TVM's ``ThreadSync`` then has nothing to add and
is switched off (:data:`TVM_THREAD_SYNC`). Idempotent: a planned kernel plans no more.

The plan is TVM's ThreadSync plan (a statement needs a barrier when one of its accesses
conflicts with an access since the last barrier; two accesses conflict unless they are
the same address of the same thread; the ``shared.dyn`` buffers count as one memory, the
arena TVM merges them into, and so do static ``shared`` buffers of disjoint lifetimes, which
TVM's StorageRewrite may give the same bytes, :func:`static_lifetimes`; a loop is walked
twice for its carried dependences), so every kernel TVM could plan gets the same barriers.
It differs where TVM's plan let a race through, and where TVM refused valid programs
("Cannot insert syncs inside condition"):

* two threads' writes to one element (``T.fill(S, 0)`` then ``T.copy(A, S)``, whose
  loops give each element to different threads) get a barrier between them; TVM orders
  only a read after a write and a write after a read, so a thread's fill could land after
  another thread's copy. Which elements each thread stores to is enumerated (over the
  thread index and the constant-range loops around the store), so stores that never meet
  across threads (``S[tx * 16 + 0]``, ``S[tx * 16 + 1]``; a copy's loop rewriting its own
  elements) get none. A write through a pointer (``cp.async``, ``stmatrix``) names no owner
  thread: it is ordered after a store to the same buffer, and a store after it (``T.fill(S, 7)``
  then ``stmatrix`` into ``S``). Two pointer writes, and stores that cannot be enumerated, are
  ordered as TVM orders them (not after other writes).

* a region under a condition that only one thread of the block passes (``if threadIdx.x <
  1``: a one-element ``T.Parallel``) runs sequentially: its accesses need no barrier among
  themselves. Its accesses still meet the rest of the block's outside the condition, where
  the barriers go (fuzz finding 9).
* a condition that is the same for every thread of the block (it reads block indices,
  loop variables of block-uniform loops, scalars, global memory, and registers or shared
  memory that every thread stored the same values in (no store of another kind, no pointer
  taken), at such indices; not ``threadIdx``) may hold a
  barrier: every thread takes the same branch (TileLang's block-sparse attention: ``if
  block_mask[k]:``, a fragment copied from the global mask, around the K/V copies and the
  gemm). A barrier inside such an ``if`` is not assumed to have run after it.
* under a thread-dependent condition, two accesses at indices of the thread index alone do
  not conflict when no element one of the kept threads reaches is reached by another through
  the other (TileLang's issue 1026: ``if tx % 2 == 0``, read ``S[tx]``, write ``S[tx ^ 1]``).
* a condition that keeps a warp-aligned contiguous range of the block's threads (``T.ws(g)``,
  ``if tx < 128``, ``if 128 <= tx < 256``) on a target that can synchronize part of a block
  (``range_barriers``: CUDA's named barriers) gets a :data:`THREAD_RANGE_SYNC` call of those
  threads where a barrier is needed inside it; the backend turns it into its own barrier over
  that many threads (``bar.sync id, count``, one id per range). Such a barrier orders the
  accesses of the range's threads only: the rest of the block does not see it (the accesses
  under the condition meet the block's outside it, where full barriers go). The user's own
  block barrier (``T.sync_threads()``) under such a condition becomes one too: the threads
  outside it would never reach ``__syncthreads()``.

A barrier needed under any other thread-dependent condition (not a warp-aligned range, a
data-dependent thread condition, or any range on a target without ``range_barriers``) is still
a ``BackendError`` naming the kernel's line: some threads would wait at a barrier the others
never reach.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..errors import BackendError, location_from_span
from ..transform._thread_values import thread_values
from ..transform.infer_layout import active_thread_range
from .shared_accesses import (
    FENCE,
    RANGE_SYNC,
    READ,
    SYNC,
    WRITE,
    Access,
    Entry,
    buffer_key,
    const_int,
    fenced,
    scope_of,
    static_lifetimes,
    strides_of,
    writes_through,
)
from .store_owners import Owners, Reach, meet_across_threads, owners

SYNC_SCOPES = ("shared", "shared.dyn")
"""The storage scopes planned here, in TVM's order."""

TVM_THREAD_SYNC = "s_tir.ThreadSync"
"""TVM's pass this module replaces (disabled in the default pipeline by name)."""

THREAD_RANGE_SYNC = "tile_thread_range_sync"
"""``call_extern("void", THREAD_RANGE_SYNC, first, count)``: a barrier of threads ``first ..
first + count - 1`` of the block alone, placed by the plan inside a condition that keeps just
them; a backend with ``range_barriers`` replaces it by its own (a named barrier)."""

_UNIFORM_OPS = frozenset({
    "prim.likely", "prim.if_then_else", "tirx.tvm_thread_invariant", "tirx.shift_left",
    "tirx.shift_right", "tirx.bitwise_and", "tirx.bitwise_or", "tirx.bitwise_xor", "tirx.bitwise_not",
    "tirx.abs", "tirx.isnan", "tirx.isinf", "tirx.isfinite", "tirx.reinterpret",
})  # fmt: skip
"""Pure operations: their result is block-uniform when their arguments are."""


def _uses(expr: Any, var: Any) -> bool:
    def on_var(v: Any) -> Any:
        return tvm_ffi.VisitInterrupt(True) if v.same_as(var) else None

    hit = tvm_ffi.structural_walk(expr, (tirx.Var, on_var))
    return bool(hit is not None and getattr(hit, "value", False))


def _substitute(expr: Any, values: dict[int, tuple[Any, Any]]) -> tuple[Any, bool]:
    """``expr`` with each variable of ``values`` (by hash: (var, value)) replaced; whether any was."""
    changed = [False]

    def on_var(var: Any) -> Any:
        found = values.get(hash(var))
        if found is not None and found[0].same_as(var):
            changed[0] = True
            return found[1]
        return var

    return tvm_ffi.structural_map(expr, (tirx.Var, on_var)), changed[0]


def _is_marked(condition: Any) -> bool:
    """Whether ``condition`` is ``tvm_thread_invariant(...)``: declared the same for every thread."""
    op = getattr(condition, "op", None)
    return isinstance(op, ir.Op) and str(op.name) == "tirx.tvm_thread_invariant"


class _Planner:
    """One walk over a kernel for one storage scope: the statements a barrier goes before."""

    def __init__(
        self,
        scope: str,
        params: list[Any],
        source: str,
        varying: frozenset[int] = frozenset(),
        survey: bool = False,
        range_barriers: int | None = None,
    ) -> None:
        self.scope = scope
        self.source = source
        self.varying = varying  # registers some thread may hold another value in (buffer keys)
        self.survey = survey  # only find the registers stored with thread-dependent values
        self.range_barriers = range_barriers  # the thread granule of a range barrier (None: none)
        self.found_varying: set[int] = set()
        self.lifetimes: dict[int, tuple[int, int, int]] = {}
        self.analyzer = tvm.sym.Analyzer()
        self.loops: list[tuple[Any, int, int] | None] = []  # enclosing loops (None: no constant range)
        self.owners: dict[int, Any] = {}  # Reach id -> (elements, owner thread or -1), or None
        self.scopes: list[list[Entry]] = []
        self.env: list[Any] = []  # thread_extent IterVars, outermost first
        self.in_device = False
        self.thread_vars: list[tuple[Any, int]] = []
        self.uniform: dict[int, bool] = {hash(p): True for p in params}
        self.bound: dict[int, tuple[Any, Any]] = {}  # Bind/Let variable -> (var, value)
        self.keep: list[Any] = []  # keeps hashed nodes alive while their hashes are in use
        self.marked: dict[int, tuple[int, int] | None] = {}  # statement -> barrier's range (None: block)
        self.conditions: list[Any] = []  # enclosing thread-dependent conditions
        self.passing: dict[tuple[int, ...], list[int] | None] = {}  # conditions -> threads kept
        self.user_syncs: dict[int, tuple[int, int]] = {}  # T.sync_threads() under a condition -> range
        self.single_thread = 0  # > 0 inside a region that one thread runs alone

    # ---- accesses -------------------------------------------------------------------

    def _enabled(self, data: Any) -> bool:
        return self.in_device and scope_of(data) == self.scope

    def _memory(self, buffer: Any) -> Any:
        return buffer_key(buffer)

    def _aliases(self, a: Any, b: Any) -> bool:
        """Whether the buffers keyed ``a`` and ``b`` (:func:`buffer_key`) may share bytes."""
        if a == b or self.scope == "shared.dyn":
            return True  # the dynamic buffers become one arena
        first, second = self.lifetimes.get(a), self.lifetimes.get(b)
        if first is None or second is None or first[0] != second[0]:
            return False
        return first[2] < second[1] or second[2] < first[1]  # disjoint: StorageRewrite may merge

    def _flat(self, buffer: Any, indices: Any) -> Any:
        indices = list(indices)
        if any(isinstance(i, tirx.Ramp) for i in indices):
            return None
        strides = strides_of(buffer)
        flat = tirx.const(0, "int32")
        for index, stride in zip(indices, strides, strict=False):
            flat = flat + index * stride
        return self.analyzer.simplify(flat)

    def _thread(self) -> Any:
        return self.env[-1].var if self.env else None

    def _reach(self, first: Any, lanes: int | None) -> Reach | None:
        if lanes is None or lanes < 1:
            return None
        known = [loop for loop in self.loops if loop is not None]
        loops = tuple(known) if len(known) == len(self.loops) else None
        first = self._expanded(first)
        varying = [(var, extent) for var, extent in self.thread_vars if extent > 1]
        if len(varying) > 1:
            # the dims the index names: the threads of the others store the same elements at the
            # same time, as one (tile's operators run on threadIdx.x, each threadIdx.y group
            # alike), which orders nothing more than TVM's plan did for them
            varying = [(var, extent) for var, extent in varying if _uses(first, var)] or varying
        if math.prod(extent for _, extent in varying) > 1024:
            return None  # not enumerable: no write-after-write order, as in TVM's plan
        if len(varying) > 1:
            return self._reach_of_linear_thread(first, lanes, varying, loops)
        thread, kept = None, np.zeros(1, dtype=np.int64)
        if varying:
            thread = varying[0][0]
            kept = self._kept_threads(*varying[0])
        return Reach(first, lanes, thread, kept, loops)

    def _reach_of_linear_thread(
        self, first: Any, lanes: int, varying: list[tuple[Any, int]], loops: Any
    ) -> Reach | None:
        """The reach of a store whose index names several thread dims (``S[ty * 32 + tx]`` in a
        ``threads=(32, 4)`` block): the dims become one index ``t`` (the first dim fastest), each
        dim's variable ``t``'s digit. Under a condition the threads it keeps are not enumerated
        (no reach, TVM's plan)."""
        if self.conditions:
            return None
        linear = tirx.Var("t", "int32")
        digits: dict[int, tuple[Any, Any]] = {}
        stride = 1
        for var, extent in varying:
            digits[hash(var)] = (var, tirx.floormod(tirx.floordiv(linear, stride), extent))
            stride *= extent
        self.keep.extend(var for var, _ in varying)  # their hashes key the substitution
        spread, _ = _substitute(first, digits)
        return Reach(spread, lanes, linear, np.arange(stride, dtype=np.int64), loops)

    def _store_reach(self, buffer: Any, indices: Any) -> Reach | None:
        """The elements a store reaches (a ``Ramp`` index: all of its lanes)."""
        strides = strides_of(buffer)
        first = tirx.const(0, "int32")
        past = 0  # how far past the first element the lanes go
        for index, stride in zip(indices, strides, strict=False):
            step = const_int(stride)
            if isinstance(index, tirx.Ramp):
                lanes, ramp = const_int(index.lanes), const_int(index.stride)
                if lanes is None or ramp is None or ramp < 0 or step is None:
                    return None
                past += (lanes - 1) * ramp * step
                index = index.base
            first = first + index * stride
        return self._reach(self.analyzer.simplify(first), past + 1)

    def _expr_accesses(self, expr: Any, out: list[Access]) -> None:
        atomic_targets: list[tuple[Any, str]] = []  # (element, callee): an atomic reads it too

        def on_load(load: Any) -> None:
            atomic = next((callee for target, callee in atomic_targets if load.same_as(target)), None)
            if self._enabled(load.source.data):
                index = self._flat(load.source, load.indices)
                out.append(Access(READ, self._memory(load.source), index, self._thread(), atomic))

        def on_call(call: Any) -> None:
            if not isinstance(call.op, ir.Op):
                return
            name = str(call.op.name)
            if name == "tirx.tvm_access_ptr" and self._enabled(call.args[1]):
                offset, extent, mask = call.args[2], call.args[3], const_int(call.args[4]) or 0
                index = offset if const_int(extent) == 1 else None
                memory = self._memory(call.args[1])
                if mask & 1:
                    out.append(Access(READ, memory, index, self._thread()))
                if mask & 2:
                    # a pointer says where an instruction may write, not which thread writes
                    # what (an LDS DMA names the whole tile): no write-after-write order
                    out.append(Access(WRITE, memory, index, self._thread(), pointer=True))
            elif name == "tirx.tvm_storage_sync" and str(call.args[0].value) != "warp":
                out.append(Access(SYNC))
            elif name == "tirx.call_extern" and str(call.args[0].value) == THREAD_RANGE_SYNC:
                out.append(Access(RANGE_SYNC))
            elif name == "tirx.call_extern" and writes_through(call):  # atomics: a write
                load = call.args[1].args[0]
                callee = str(call.args[0].value)
                atomic_targets.append((load, callee))
                if self._enabled(load.source.data):
                    index = self._flat(load.source, load.indices)
                    out.append(Access(WRITE, self._memory(load.source), index, self._thread(), callee))

        tvm_ffi.structural_walk(expr, [(ir.TensorLoad, on_load), (ir.Call, on_call)], order="pre")

    # ---- uniformity -------------------------------------------------------------------

    def _is_uniform(self, expr: Any) -> bool:
        """Whether ``expr`` has one value for every thread of the block."""
        verdict = [True]

        def on_var(var: Any) -> Any:
            if not self.uniform.get(hash(var), False):
                verdict[0] = False
                return tvm_ffi.VisitInterrupt(False)
            return None

        def on_load(load: Any) -> Any:
            scope = str(load.source.scope())
            # registers, and shared memory, that every thread stored the same values in
            same = scope.startswith(("local", "shared")) and buffer_key(load.source) not in self.varying
            if not (scope == "global" or same) or not all(self._is_uniform(i) for i in load.indices):
                verdict[0] = False
                return tvm_ffi.VisitInterrupt(False)
            return tvm_ffi.WalkResult.SKIP

        def on_call(call: Any) -> Any:
            name = str(call.op.name) if isinstance(call.op, ir.Op) else ""
            if name == "tirx.tvm_thread_invariant":
                return tvm_ffi.WalkResult.SKIP
            if name not in _UNIFORM_OPS:
                verdict[0] = False
                return tvm_ffi.VisitInterrupt(False)
            return None

        callbacks = [(ir.TensorLoad, on_load), (ir.Call, on_call), (tirx.Var, on_var)]
        tvm_ffi.structural_walk(expr, callbacks, order="pre")
        return verdict[0]

    def _expanded(self, expr: Any) -> Any:
        """``expr`` with the values of the Bind/Let variables it reads (for the thread analysis)."""
        for _ in range(8):  # Bind chains are short; the bound stops a cyclic rebinding
            expr, changed = _substitute(expr, self.bound)
            if not changed:
                break
        return expr

    def _one_thread(self, condition: Any) -> bool:
        """Whether at most one thread of the block passes ``condition`` and the enclosing ones."""
        if not self.thread_vars:
            return False
        constraints = [self._expanded(c) for c in [*self.conditions, condition]]
        joined = constraints[0]
        for c in constraints[1:]:
            joined = tirx.And(joined, c)
        with self.analyzer.constraint_scope(joined):
            for var, extent in self.thread_vars:
                if extent == 1:
                    continue
                bound = self.analyzer.const_int_bound(var)
                if bound.min_value != bound.max_value:
                    return False
        return True

    # ---- the walk -----------------------------------------------------------------------

    def _leaf(self, stmt: Any, exprs: list[Any], write: Access | None = None) -> None:
        accesses: list[Access] = [write] if write is not None else []
        for expr in exprs:
            self._expr_accesses(expr, accesses)
            self._registers_passed_by_address(expr)
        if self.scopes and (accesses or not isinstance(stmt, tirx.Evaluate)):
            self.scopes[-1].append(Entry(stmt, accesses))

    def visit(self, stmt: Any) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                self.visit(child)
        elif isinstance(stmt, tirx.AttrStmt):
            self._visit_attr(stmt)
        elif isinstance(stmt, tirx.For):
            self._visit_for(stmt)
        elif isinstance(stmt, tirx.IfThenElse):
            self._visit_if(stmt)
        elif isinstance(stmt, tirx.While):
            self._visit_while(stmt)
        elif isinstance(stmt, tirx.BufferStore):
            if str(stmt.buffer.scope()).startswith(("local", "shared")) and not self._uniform_store(stmt):
                self.found_varying.add(buffer_key(stmt.buffer))
            write = None
            if self._enabled(stmt.buffer.data):
                index = self._flat(stmt.buffer, stmt.indices)
                reach = self._store_reach(stmt.buffer, stmt.indices)
                element = tirx.BufferLoad(stmt.buffer, list(stmt.indices))
                write = Access(
                    WRITE, self._memory(stmt.buffer), index, self._thread(), reach=reach, element=element
                )
            self._leaf(stmt, [stmt.value, *stmt.indices], write)
        elif isinstance(stmt, tirx.Bind):
            self._define(stmt.var, stmt.value)
            self._leaf(stmt, [stmt.value])
        elif isinstance(stmt, tirx.Evaluate):
            if self.conditions and not self.single_thread and _is_block_sync(stmt.value):
                self._user_sync(stmt)
            else:
                self._leaf(stmt, [stmt.value])
        elif isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
            return
        else:
            exprs: list[Any] = []

            def on_expr(expr: Any) -> Any:
                exprs.append(expr)
                return tvm_ffi.WalkResult.SKIP

            tvm_ffi.structural_walk(stmt, (ir.Expr, on_expr), order="pre")
            self._leaf(stmt, exprs)

    def _registers_passed_by_address(self, expr: Any) -> None:
        """Registers a call may write through a pointer (an mma's accumulator, ldmatrix's
        destination) hold values of their own thread: not block-uniform."""

        def on_call(call: Any) -> None:
            name = str(call.op.name) if isinstance(call.op, ir.Op) else ""
            if name == "tirx.address_of" and isinstance(call.args[0], ir.TensorLoad):
                buffer, data = call.args[0].source, call.args[0].source.data
            elif name == "tirx.tvm_access_ptr":
                buffer = data = call.args[1]
            else:
                return
            if scope_of(data).startswith(("local", "shared")):
                self.found_varying.add(buffer_key(buffer))

        tvm_ffi.structural_walk(expr, (ir.Call, on_call))

    def _uniform_store(self, stmt: Any) -> bool:
        """Whether every thread stores the same value at the same register index here."""
        return not self.conditions and all(self._is_uniform(e) for e in [stmt.value, *stmt.indices])

    def _define(self, var: Any, value: Any) -> None:
        self.uniform[hash(var)] = self._is_uniform(value)
        self.bound[hash(var)] = (var, value)
        self.keep.append(var)

    def _visit_attr(self, stmt: Any) -> None:
        if stmt.attr_key == "hand_threaded":
            return
        if stmt.attr_key != "thread_extent":
            self.visit(stmt.body)
            return
        iv = stmt.node
        tag = str(iv.thread_tag)
        self.uniform[hash(iv.var)] = not tag.startswith("threadIdx")
        self.keep.append(iv.var)
        pushed = tag.startswith("threadIdx")
        if pushed:
            extent = const_int(stmt.value)
            self.thread_vars.append((iv.var, extent if extent is not None else 1 << 30))
            self.analyzer.bind(iv.var, ir.Range(0, self.thread_vars[-1][1]))
        self.env.append(iv)
        if not self.in_device:
            self.in_device = True
            self.scopes.append([])
            self.visit(stmt.body)
            self._summarize(self.scopes.pop(), None)
            self.in_device = False
        else:
            self.visit(stmt.body)
        self.env.pop()
        if pushed:
            self.thread_vars.pop()

    def _visit_for(self, loop: Any) -> None:
        bounds_uniform = self._is_uniform(loop.min) and self._is_uniform(loop.extent)
        self.uniform[hash(loop.loop_var)] = bounds_uniform and loop.kind != tirx.ForKind.THREAD_BINDING
        self.keep.append(loop.loop_var)
        start, count = const_int(loop.min), const_int(loop.extent)
        self.loops.append(None if start is None or count is None else (loop.loop_var, start, count))
        self.scopes.append([])
        self.visit(loop.body)
        self.loops.pop()
        accesses = self._summarize(self.scopes.pop(), loop)
        # the accesses seen from outside the loop: an index that moves with it covers a range
        first = {hash(loop.loop_var): (loop.loop_var, loop.min)}
        relaxed = []
        for a in accesses:
            if a.kind != SYNC and a.index is not None and _uses(a.index, loop.loop_var):
                one = const_int(loop.extent) == 1
                index = self.analyzer.simplify(_substitute(a.index, first)[0]) if one else None
                a = dataclasses.replace(a, index=index)
            relaxed.append(a)
        if relaxed and self.scopes:
            self.scopes[-1].append(Entry(loop, relaxed))

    def _branch(self, body: Any, condition: Any | None, loop: Any | None = None) -> list[Access]:
        """The exposed accesses of ``body``, run under ``condition`` (None: block-uniform)."""
        single = condition is not None and self._one_thread(condition)
        if condition is not None:
            self.conditions.append(condition)
        self.single_thread += int(single)
        self.scopes.append([])
        self.visit(body)
        accesses = self._summarize(self.scopes.pop(), loop)
        self.single_thread -= int(single)
        if condition is not None:
            self.conditions.pop()
        return accesses

    def _visit_if(self, node: Any) -> None:
        condition = node.condition
        reads: list[Access] = []
        self._expr_accesses(condition, reads)
        reads = [a for a in reads if a.kind == READ]
        marked = _is_marked(condition)
        uniform = marked or self._is_uniform(condition)
        then = self._branch(node.then_case, None if uniform else condition)
        other = None
        if node.else_case is not None:
            other = self._branch(node.else_case, None if uniform else tirx.Not(condition))
        accesses = [*reads, *then, *(other or [])]
        if uniform and not marked:
            accesses = fenced(accesses)
        if self.scopes:
            self.scopes[-1].append(Entry(node, accesses))

    def _visit_while(self, node: Any) -> None:
        condition = node.condition
        marked = _is_marked(condition)
        uniform = marked or self._is_uniform(condition)
        # TVM walks a while loop once; a block-uniform one it refused is walked as a loop
        body = self._branch(node.body, None if uniform else condition, None if marked else node)
        if uniform and not marked:
            body = fenced(body)
        if self.scopes:
            self.scopes[-1].append(Entry(node, body))

    # ---- the plan ---------------------------------------------------------------------

    def _conflict(self, before: Access, now: Access) -> bool:
        if not self._aliases(before.memory, now.memory):
            return False
        if before.atomic is not None and before.atomic == now.atomic:
            return False
        if before.index is not None and now.index is not None:
            same = bool(tvm_ffi.structural_equal(before.index, now.index))
            thread = now.thread
            if same and (thread is None or (_uses(now.index, thread) and _uses(before.index, thread))):
                return False
            if self.conditions and before.memory == now.memory and self._apart(before.index, now.index):
                return False  # element indices of one buffer: another's may share the arena's bytes
        return True

    def _overwrites(self, before: Access, now: Access) -> bool:
        """Whether write ``now`` may land on an element another thread wrote at ``before``.

        Writes to two buffers never do: the bytes are shared only after the first buffer's
        last use, and a write no one reads is not ordered by anything (a read after it is,
        by the read-after-write rule). A thread writing again what it named before does not
        (TVM's rule for reads, :meth:`_conflict`). Otherwise the elements each store reaches
        are enumerated over the thread index and the loops around it (:meth:`_owners`):
        ``S[tx * 16 + 0]`` and ``S[tx * 16 + 1]`` never meet; a fill over ``i * 128 + tx``
        and a copy over ``2 * tx + i`` do. Writes through pointers (``cp.async``, ``stmatrix``,
        an LDS DMA) name no owner thread: one after a store to the same buffer, or a store after
        one, is ordered (``T.fill(S, 7)`` then ``stmatrix`` into ``S``). Two pointer writes, and
        stores that cannot be enumerated (a loop without a constant range, a condition in a
        block of several thread dims), keep TVM's plan, which orders no write after a write
        (a ``cp.async`` ring's stages).
        """
        if before.memory != now.memory or before.atomic is not None or now.atomic is not None:
            return False
        if before.pointer != now.pointer:
            return True
        if before.reach is None or now.reach is None:
            return False
        thread = now.thread
        if (
            before.element is not None
            and now.element is not None
            and thread is not None
            and bool(tvm_ffi.structural_equal(before.element, now.element))
            and _uses(now.element, thread)
        ):
            return False
        first, second = self._owners(before.reach), self._owners(now.reach)
        if first is None or second is None:
            return False  # not enumerable: TVM's plan, which orders no writes after writes
        return meet_across_threads(first, second)

    def _owners(self, reach: Reach | None) -> Owners | None:
        """:func:`~tile.ir.gpu.store_owners.owners` of ``reach``, once per reach."""
        if reach is None:
            return None
        key = id(reach)
        if key not in self.owners:
            self.keep.append(reach)  # its id keys the cache
            self.owners[key] = owners(reach)
        return self.owners[key]  # type: ignore[no-any-return]

    def _kept_threads(self, var: Any, extent: int) -> Any:
        """The thread indices the enclosing conditions keep (all of them outside conditions), as
        a numpy array; None when the conditions read more than the thread index."""
        if not self.conditions:
            return np.arange(extent)
        key = tuple(hash(c) for c in self.conditions)
        if key not in self.passing:
            joined = self.conditions[0]
            for c in self.conditions[1:]:
                joined = tirx.And(joined, c)
            kept = thread_values(self._expanded(joined), var, extent, self.analyzer)
            self.passing[key] = None if kept is None else [t for t, keeps in enumerate(kept) if keeps]
            self.keep.extend(self.conditions)  # their hashes key the cache
        passing = self.passing[key]
        return None if passing is None else np.array(passing, dtype=np.int64)

    def _apart(self, first: Any, second: Any) -> bool:
        """Whether no thread the enclosing conditions keep reaches an element at ``first`` that
        one of them reaches at ``second`` (TileLang's issue 1026: ``if tx % 2 == 0``, read
        ``S[tx]``, write ``S[tx ^ 1]``). Asked only under a thread-dependent condition, where
        TVM's plan refused the barrier, of indices of the thread index alone, thread by thread."""
        varying = [(var, extent) for var, extent in self.thread_vars if extent > 1]
        if len(varying) != 1 or varying[0][1] > 1024:
            return False
        var, extent = varying[0]
        passing = self._kept_threads(var, extent)
        if passing is None:
            return False
        reached = []
        for index in (first, second):
            values = thread_values(self._expanded(index), var, extent, self.analyzer)
            if values is None:
                return False
            reached.append({values[t] for t in passing})
        return not reached[0] & reached[1]

    def _needs_barrier(self, entry: Entry, reads: list[Access], writes: list[Access]) -> bool:
        for a in entry.accesses:
            if a.kind == READ and any(self._conflict(w, a) for w in writes):
                return True
            if a.kind == WRITE and any(self._conflict(r, a) for r in reads):
                return True
            if a.kind == WRITE and any(self._overwrites(w, a) for w in writes):
                return True  # two threads' writes to one element: the later must land last
            if a.kind in (SYNC, RANGE_SYNC):
                reads.clear()
                writes.clear()
            if a.kind == FENCE:
                return False  # what follows ran after a barrier, or not at all
        return False

    def _mark(self, entry: Entry) -> None:
        if self.single_thread or self.survey:
            return
        self.marked[hash(entry.stmt)] = self._barrier_range(entry.stmt) if self.conditions else None
        self.keep.append(entry.stmt)

    def _user_sync(self, stmt: Any) -> None:
        """The user's block barrier (``T.sync_threads()``) under a thread-dependent condition,
        which the block's other threads never reach: it becomes the barrier of the threads the
        condition keeps (:func:`plan_barriers_in` rewrites it), or an error."""
        self.user_syncs[hash(stmt)] = self._barrier_range(stmt, "T.sync_threads() waits for the whole block")
        self.keep.append(stmt)
        if self.scopes:
            self.scopes[-1].append(Entry(stmt, [Access(RANGE_SYNC)]))

    def _barrier_range(self, stmt: Any, need: str = "a shared-memory barrier is needed") -> tuple[int, int]:
        """``(first, count)``: the threads the enclosing conditions keep, which a barrier before
        ``stmt`` must synchronize alone. Raises where no barrier of the target can."""
        varying = [(var, extent) for var, extent in self.thread_vars if extent > 1]
        kept = None
        if len(varying) == 1 and varying[0][0].same_as(self.env[-1].var):
            (var, extent) = varying[0]
            kept = active_thread_range([self._expanded(c) for c in self.conditions], var, extent)
        granule = self.range_barriers
        if kept is not None and granule is not None and kept[0] % granule == 0 and kept[1] % granule == 0:
            return kept
        if kept is None:
            what = "a condition that depends on the thread index"
            fix = (
                "make the condition keep one contiguous range of whole warps of threadIdx.x "
                "(T.ws(g), `if tx < 128:`, `if tx >= 128:`), or move the shared-memory accesses that "
                "depend on each other out of the `if`"
            )
        else:
            first, count = kept
            what = f"a condition that keeps threads [{first}, {first + count}) of the block"
            if granule is None:
                fix = (
                    "this target has no barrier over part of a block: move the shared-memory accesses "
                    "that depend on each other out of the thread-dependent `if` (T.ws), so that every "
                    "thread of the block meets the barrier"
                )
            else:
                fix = (
                    f"a barrier over part of the block counts whole warps: start and end the range on "
                    f"multiples of {granule} threads, or move the shared-memory accesses that depend on "
                    f"each other out of the `if`"
                )
        raise BackendError(
            f"{need} inside {what} (kernel at {self.source}): some threads "
            f"would wait at a barrier others never reach",
            hint=fix,
            location=_first_location(stmt),
        )

    def _summarize(self, seq: list[Entry], loop: Any | None) -> list[Access]:
        """Mark the statements of ``seq`` that need a barrier; the accesses it exposes to its parent."""
        reads: list[Access] = []
        writes: list[Access] = []
        planning = not self.single_thread
        for entry in seq:
            barrier = hash(entry.stmt) in self.marked
            if barrier:
                reads.clear()
                writes.clear()
            if planning and not barrier and self._needs_barrier(entry, reads, writes):
                barrier = True
                self._mark(entry)
            if barrier:
                reads.clear()
                writes.clear()
            for a in entry.accesses:
                if a.kind == READ:
                    reads.append(a)
                elif a.kind == WRITE:
                    writes.append(a)
                elif a.kind in (SYNC, RANGE_SYNC):
                    reads.clear()
                    writes.clear()
        if loop is not None and planning:
            for entry in seq:
                if hash(entry.stmt) in self.marked or not (reads or writes):
                    break
                if self._needs_barrier(entry, reads, writes):
                    self._mark(entry)
                    break
        # what the parent sees: a barrier over the block hides what came before it; one over a
        # range of its threads hides nothing from the threads outside the range
        head: list[Access] = []
        tail: list[Access] = []
        syncs = 0
        for entry in seq:
            if self.marked.get(hash(entry.stmt), ()) is None:
                if syncs:
                    tail.clear()
                else:
                    head.append(Access(SYNC))
                syncs += 1
            for a in entry.accesses:
                if a.kind == RANGE_SYNC:
                    continue
                if a.kind == SYNC:
                    if syncs:
                        tail.clear()
                    else:
                        head.append(a)
                    syncs += 1
                elif syncs:
                    tail.append(a)
                else:
                    head.append(a)
        return head + tail


def _first_location(stmt: Any) -> Any:
    """The user's line of the first statement in ``stmt`` that has one (None: none has)."""
    found: list[Any] = []

    def visit(node: Any) -> Any:
        where = location_from_span(getattr(node, "span", None))
        if where is None:
            return None
        found.append(where)
        return tvm_ffi.VisitInterrupt(True)

    kinds = (tirx.Evaluate, tirx.BufferStore, tirx.For, tirx.IfThenElse, tirx.Bind)
    tvm_ffi.structural_walk(stmt, [(kind, visit) for kind in kinds], order="pre")
    return found[0] if found else None


def _is_block_sync(expr: Any) -> bool:
    """Whether ``expr`` is ``tvm_storage_sync("shared")`` (``T.sync_threads()``)."""
    op = getattr(expr, "op", None)
    if not (isinstance(op, ir.Op) and str(op.name) == "tirx.tvm_storage_sync"):
        return False
    return str(expr.args[0].value) in SYNC_SCOPES


def _barrier(scope: str, threads: tuple[int, int] | None) -> Any:
    if threads is None:
        return tirx.Evaluate(tirx.op.tvm_storage_sync(scope))
    first, count = (tirx.const(n, "int32") for n in threads)
    return tirx.Evaluate(tirx.call_extern("void", THREAD_RANGE_SYNC, first, count))


def _inserter(marked: dict[int, tuple[int, int] | None], scope: str) -> Any:
    def insert(node: Any, mutator: Any, *_: Any) -> Any:
        new = mutator.default_mutate(node)
        key = hash(node)
        return tirx.SeqStmt([_barrier(scope, marked[key]), new]) if key in marked else new

    return insert


DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
"""TileLang's pass config key (a target option here): true leaves the block barriers to the
kernel's author, as in TileLang, where the key turns off its ThreadSync: the kernel gets the
``T.sync_threads()`` it writes and those tile's operators place themselves (a reduction's
workspace, an async copy ring), nothing planned."""

USER_BARRIERS_ONLY = "tile.user_barriers_only"
"""PrimFunc attr set by :func:`barriers_as_written`: :func:`plan_barriers_in` leaves the kernel as it is."""


def barriers_as_written(mod: Any, target: Any) -> Any:
    """``mod`` with its kernels marked :data:`USER_BARRIERS_ONLY` where ``target`` has the option
    :data:`DISABLE_THREAD_STORAGE_SYNC` set true; ``mod`` itself otherwise."""
    value = target.option(DISABLE_THREAD_STORAGE_SYNC) if hasattr(target, "option") else None
    if str(value or "0").strip().lower() not in ("1", "true", "on", "yes"):
        return mod
    new = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            new[gv] = func.with_attr(USER_BARRIERS_ONLY, tirx.const(1, "int32"))
    return new


def plan_barriers_in(func: Any, range_barriers: int | None = None) -> Any:
    """``func`` with the block barriers its shared-memory accesses need (see module docstring);
    ``func`` as it is when it is marked :data:`USER_BARRIERS_ONLY`.

    ``range_barriers``: the target synchronizes a contiguous range of the block's threads alone
    when it starts and ends on multiples of this many threads (CUDA: a warp, 32); None where it
    cannot (a barrier inside a thread-dependent condition is then a ``BackendError``)."""
    if func.attrs is not None and USER_BARRIERS_ONLY in func.attrs:
        return func
    # parameters and the symbols the body reads without defining (dynamic extents) are uniform
    params = [*func.params, *tvm.tirx.analysis.undefined_vars(func.body, [])]
    source = str(func.attrs["tile.source"]) if func.attrs is not None and "tile.source" in func.attrs else "?"
    # registers (a fragment every thread holds whole, lowered) are block-uniform when every
    # store to them is: found by walking until no more registers turn out thread-dependent
    varying: frozenset[int] = frozenset()
    while True:
        survey = _Planner(SYNC_SCOPES[0], params, source, varying, survey=True, range_barriers=range_barriers)
        survey.visit(func.body)
        if survey.found_varying <= varying:
            break
        varying = varying | survey.found_varying
    body = func.body
    if survey.user_syncs:  # the user's block barriers under thread-dependent conditions
        syncs = survey.user_syncs

        def range_sync(node: Any, *_: Any) -> Any:
            return _barrier("shared", syncs[hash(node)]) if hash(node) in syncs else node

        body = tvm_ffi.structural_mutate(body, (tirx.Evaluate, range_sync))
    for scope in SYNC_SCOPES:
        planner = _Planner(scope, params, source, varying, range_barriers=range_barriers)
        planner.lifetimes = static_lifetimes(body)
        planner.visit(body)
        if planner.marked:
            body = tvm_ffi.structural_mutate(body, (tirx.Stmt, _inserter(planner.marked, scope)))
    return func if body.same_as(func.body) else func.with_body(body)


def plan_barriers(mod: Any, range_barriers: int | None = None) -> Any:
    """``mod`` with :func:`plan_barriers_in` applied to each of its functions."""
    funcs = [(gv, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    updated = {gv: plan_barriers_in(f, range_barriers) for gv, f in funcs}
    if all(updated[gv].same_as(mod[gv]) for gv in updated):
        return mod
    new = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
    for gv, f in updated.items():
        new[gv] = f
    return new


__all__ = [
    "DISABLE_THREAD_STORAGE_SYNC",
    "SYNC_SCOPES",
    "THREAD_RANGE_SYNC",
    "TVM_THREAD_SYNC",
    "USER_BARRIERS_ONLY",
    "barriers_as_written",
    "plan_barriers",
    "plan_barriers_in",
]
