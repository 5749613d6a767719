"""Pass ``fuse_fragment_loops``: one pass over the data instead of one per tile op.

A block written for a GPU runs on one CPU core as a sequence of loop nests over its
tile: ``T.copy`` global -> fragment, ``T.Parallel`` compute, ``T.reduce_*``, ``T.copy``
fragment -> global. Run one after the other, each nest streams the whole tile through
the caches again (a 16 x 4096 float32 softmax block is 256 KiB: six passes through L2).
This pass fuses such nests and shrinks the fragments they share, so an elementwise
kernel streams each element once and a row-wise kernel works on one row in L1.

Needs: tile ops lowered (``lower_tile_ops``): ``T.Parallel`` nests as ``For`` loops
annotated ``tile.parallel``; block fragments and locals allocated by ``AllocBuffer``.
Runs before ``split_dynamic_tails`` (whose guard analysis then sees the fused nest).

Guarantees, in every statement sequence (innermost sequences included):

* Fusion. Adjacent ``tile.parallel`` loops with the same ``min`` and ``extent``
  become one ``tile.parallel`` loop running the bodies in their original order, when
  every buffer that one of them writes and another touches is *sliced* by the loop:
  some index dimension ``k`` is ``var + c`` in every access, with one ``c`` that no
  loop or local of the bodies changes. Iteration ``var`` then touches only slab
  ``var + c`` of such buffers, so no iteration reads or overwrites what another one
  writes: running the bodies per iteration gives the sequential result, and the fused
  loop's iterations stay independent (still ``T.Parallel``). A statement between two
  fusable loops that shares no written buffer with the first (a ``T.copy`` of a
  weight vector, an allocation) is moved before the fused loop. Bodies with accesses
  this analysis cannot see (pointers, extern calls, attributes, unlowered tile ops)
  are never fused or moved.
* Contraction. A block-local buffer allocated in the sequence whose only user is one
  ``tile.parallel`` loop that slices it (as above) loses the sliced dimension and is
  allocated inside the loop instead, per iteration: each iteration only ever sees its
  own slab, and nothing reads the buffer before or after the loop. Applied level by
  level, a fragment used only inside one fused elementwise nest becomes a scalar
  local (``vectorize_parallel_loops`` gives it one register lane per vector lane); a
  row fragment of a row-wise kernel becomes one row.

The result: ``C[i, j] = A[i, j] + B[i, j]`` written with two copies in, a
``T.Parallel`` and a copy out becomes one loop nest reading ``A`` and ``B`` once and
writing ``C`` once, and softmax/RMSNorm blocks run row by row (copy-in, reductions,
rescale and copy-out of one row before the next) with the row in L1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.ir.annotations import LOOP_FRAGMENT
from tile.ir.transform import Property, function_pass
from tile.ir.transform._traverse import mutate
from tile.ir.transform.infer_layout import is_parallel
from tile.ir.transform.properties import PARALLEL_NESTS, TILE_OPS_LOWERED

MAX_MOVED = 2
"""Statements (besides allocations) moved ahead of a loop to let it fuse with a later one."""

_STMTS = (tirx.For, tirx.SeqStmt, tirx.BufferStore, tirx.IfThenElse, tirx.Bind, tirx.AllocBuffer)
"""Statement kinds whose memory effects are exactly their buffer loads and stores."""

_OPAQUE_CALLS = (
    "buffer_data",
    "address_of",
    "access_ptr",
    "call_",
    "tvm_",
    "ptx",
    "atomic",
    "handle",
    "pointer",
)
"""Substrings of call names that may touch memory behind the analysis' back."""


@dataclasses.dataclass(frozen=True)
class Access:
    buffer: Any  # a buffer is a variable in TVM 0.27: its identity
    indices: tuple[Any, ...]
    write: bool


@dataclasses.dataclass
class Summary:
    """What a statement touches, or ``opaque`` when that cannot be known."""

    accesses: list[Access]
    bound: list[Any]  # variables the statement defines (loop variables, locals)
    opaque: bool

    def writes(self) -> list[Any]:
        return [a.buffer for a in self.accesses if a.write]

    def touches(self, buffer: Any) -> bool:
        return any(a.buffer.same_as(buffer) for a in self.accesses)


def summarize(stmt: Any, aliased: tuple[Any, ...] = ()) -> Summary:
    """Every buffer access of ``stmt`` (see ``Summary``); touching an ``aliased`` buffer is opaque."""
    accesses: list[Access] = []
    bound: list[Any] = []
    opaque = False

    def on_stmt(node: Any) -> None:
        nonlocal opaque
        if isinstance(node, tirx.Evaluate):
            opaque = opaque or not isinstance(node.value, tirx.IntImm)
        elif not isinstance(node, _STMTS):
            opaque = True
        elif isinstance(node, tirx.BufferStore):
            accesses.append(Access(node.buffer, tuple(node.indices), True))
        elif isinstance(node, tirx.For):
            bound.append(node.loop_var)
            opaque = opaque or node.thread_binding is not None
        elif isinstance(node, tirx.Bind):
            bound.append(node.var)
        elif isinstance(node, tirx.AllocBuffer):
            opaque = opaque or not str(node.buffer.scope()).startswith("local")

    def on_load(node: Any) -> None:
        accesses.append(Access(node.source, tuple(node.indices), False))

    def on_call(node: Any) -> None:
        nonlocal opaque
        op = node.op
        name = str(op.name) if isinstance(op, ir.Op) else ""
        opaque = opaque or not name or any(s in name for s in _OPAQUE_CALLS)

    tvm_ffi.structural_walk(stmt, [(tirx.Stmt, on_stmt), (ir.TensorLoad, on_load), (ir.Call, on_call)])
    opaque = opaque or any(a.buffer.same_as(b) for a in accesses for b in aliased)
    return Summary(accesses, bound, opaque)


def _uses_any(expr: Any, variables: list[Any]) -> bool:
    hit = tvm_ffi.structural_walk(
        expr,
        (ir.Var, lambda v: tvm_ffi.VisitInterrupt(True) if any(v.same_as(b) for b in variables) else None),
    )
    return hit is not None


def slice_dim(accesses: list[Access], var: Any, bound: list[Any]) -> int | None:
    """A dimension ``k`` with ``indices[k] == var + c`` in every access, one ``c`` free of ``bound``."""
    ranks = {len(a.indices) for a in accesses}
    if len(ranks) != 1:
        return None
    analyzer = tvm.sym.Analyzer()
    for k in range(ranks.pop()):
        offsets = []
        for a in accesses:
            index = a.indices[k]
            same = str(index.ty) == str(var.ty)
            offset = analyzer.simplify(index - (var if same else tirx.Cast(str(index.ty), var)))
            if _uses_any(offset, [var, *bound]):
                break
            offsets.append(offset)
        else:
            first = offsets[0]
            if all(_is_zero(analyzer.simplify(o - first)) for o in offsets[1:]):
                return k
    return None


def _is_zero(expr: Any) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 0


def _shares_no_write(a: Summary, b: Summary) -> bool:
    """Neither statement writes a buffer the other one touches."""
    return not any(b.touches(d) for d in a.writes()) and not any(a.touches(d) for d in b.writes())


def _same(a: Any, b: Any) -> bool:
    return bool(tvm_ffi.structural_equal(a, b))


def _rename(body: Any, old: Any, new: Any) -> Any:
    return tvm_ffi.structural_map(body, (ir.Var, lambda v: new if v.same_as(old) else v))


def _flat(stmt: Any) -> list[Any]:
    return list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]


def _fusable_loop(stmt: Any) -> bool:
    return isinstance(stmt, tirx.For) and is_parallel(stmt) and stmt.thread_binding is None


def try_fuse(first: Any, second: Any, aliased: tuple[Any, ...] = ()) -> Any | None:
    """``first`` and ``second`` as one ``tile.parallel`` loop, or None when that is not exact."""
    if not (_fusable_loop(first) and _fusable_loop(second)):
        return None
    if not (_same(first.min, second.min) and _same(first.extent, second.extent)):
        return None
    var = first.loop_var
    body = _rename(second.body, second.loop_var, var)
    a, b = summarize(first.body, aliased), summarize(body, aliased)
    if a.opaque or b.opaque:
        return None
    bound = [*a.bound, *b.bound]
    shared = [d for d in [*a.writes(), *b.writes()] if a.touches(d) and b.touches(d)]
    for buffer in shared:
        group = [x for x in [*a.accesses, *b.accesses] if x.buffer.same_as(buffer)]
        if slice_dim(group, var, bound) is None:
            return None
    notes = {str(k): v for k, v in first.annotations.items() if str(k) != LOOP_FRAGMENT}
    fused = tirx.SeqStmt([*_flat(first.body), *_flat(body)])
    return tirx.For(var, first.min, first.extent, first.kind, fused, None, notes)


def fuse_sequence(
    stmts: list[Any],
    aliased: tuple[Any, ...] = (),
    fuse: Callable[[Any, Any, tuple[Any, ...]], Any | None] | None = None,
    candidate: Callable[[Any], bool] | None = None,
) -> list[Any]:
    """Fuse adjacent loops of one statement sequence (module docstring, "Fusion").

    ``fuse(first, second, aliased)`` returns the two loops as one, or None; ``candidate``
    says which statements may start a fused group. Both default to this pass' rules
    (``try_fuse`` and ``tile.parallel`` loops); ``fuse_vector_nests`` passes its own.
    """
    fuse = fuse or try_fuse
    candidate = candidate or _fusable_loop
    out: list[Any] = []
    group: Any = None  # the loop being grown
    moved: list[Any] = []  # statements after ``group`` that may run before it
    grew_after_move = False

    def flush() -> None:
        nonlocal group, moved, grew_after_move
        if group is not None:
            out.extend([*moved, group] if grew_after_move else [group, *moved])
        else:
            out.extend(moved)
        group, moved, grew_after_move = None, [], False

    for stmt in stmts:
        if group is not None:
            fused = fuse(group, stmt, aliased)
            if fused is not None:
                group, grew_after_move = fused, bool(moved)
                continue
            if _movable(stmt, group, moved, aliased):
                moved.append(stmt)
                continue
        flush()
        if candidate(stmt):
            group = stmt
        else:
            out.append(stmt)
    flush()
    return out


def _movable(stmt: Any, group: Any, moved: list[Any], aliased: tuple[Any, ...]) -> bool:
    if isinstance(stmt, tirx.AllocBuffer):
        return True
    if sum(not isinstance(s, tirx.AllocBuffer) for s in moved) >= MAX_MOVED:
        return False
    here, there = summarize(stmt, aliased), summarize(group, aliased)
    return not here.opaque and not there.opaque and _shares_no_write(here, there)


def contract_sequence(stmts: list[Any], aliased: tuple[Any, ...] = ()) -> list[Any]:
    """Move buffers used by one slicing loop into it, minus the sliced dim ("Contraction")."""
    out = list(stmts)
    for alloc in [s for s in stmts if isinstance(s, tirx.AllocBuffer)]:
        buffer = alloc.buffer
        users = [
            i for i, s in enumerate(out) if not isinstance(s, tirx.AllocBuffer) and _uses_any(s, [buffer])
        ]
        if len(users) != 1 or not _fusable_loop(out[users[0]]):
            continue
        loop = out[users[0]]
        if users[0] < out.index(alloc):
            continue
        summary = summarize(loop.body, aliased)
        mine = [a for a in summary.accesses if a.buffer.same_as(buffer)]
        if summary.opaque:
            continue
        k = slice_dim(mine, loop.loop_var, summary.bound)
        if k is None or not _const_shape(buffer):
            continue
        out[users[0]] = _contract(loop, buffer, k)
        out.remove(alloc)
    return out


def _const_shape(buffer: Any) -> bool:
    return all(isinstance(d, tirx.IntImm) for d in buffer.shape)


def _contract(loop: Any, buffer: Any, k: int) -> Any:
    shape = [d for i, d in enumerate(buffer.shape) if i != k] or [1]
    row = tirx.decl_buffer(shape, buffer.dtype, name=str(buffer.name), scope="local")

    def drop(indices: Any) -> list[Any]:
        kept = [x for i, x in enumerate(indices) if i != k]
        return kept or [tirx.const(0, "int32")]

    def on_load(load: Any) -> Any:
        if load.source.same_as(buffer):
            return tirx.BufferLoad(row, drop(load.indices))
        return load

    def on_store(store: Any) -> Any:
        if store.buffer.same_as(buffer):
            return tirx.BufferStore(row, store.value, drop(store.indices))
        return store

    body = tvm_ffi.structural_map(loop.body, [(ir.TensorLoad, on_load), (tirx.BufferStore, on_store)])
    body = tirx.SeqStmt([tirx.AllocBuffer(row), *_flat(body)])
    return tirx.For(
        loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations
    )


def views(func: Any) -> tuple[Any, ...]:
    """Buffers that share storage with another buffer (``DeclBuffer`` views and what they view)."""
    found: list[Any] = []

    def on_decl(node: Any) -> None:
        found.append(node.buffer)
        tvm_ffi.structural_walk(node.buffer.data, (ir.Var, found.append))

    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, on_decl))
    return tuple(found)


def map_sequences(func: Any, rewrite: Callable[[list[Any], tuple[Any, ...]], list[Any]]) -> Any:
    """``func`` with each statement sequence replaced by ``rewrite(stmts, views(func))``.

    An outer sequence is rewritten first, then the statements it became (a fused loop's body
    is a sequence again); a sequence rewritten to one statement is that statement.
    """
    aliased = views(func)

    def on_seq(seq: Any, m: Any) -> Any:
        done = [m.mutate(s) for s in rewrite(list(seq.seq), aliased)]
        return done[0] if len(done) == 1 else tirx.SeqStmt(done)

    return func.with_body(mutate(func.body, [(tirx.SeqStmt, on_seq)]))


def fuse_fragment_loops(func: Any) -> Any:
    """Fuse a block's loop nests and shrink the fragments they share (module docstring)."""

    def fuse_then_contract(stmts: list[Any], aliased: tuple[Any, ...]) -> list[Any]:
        return contract_sequence(fuse_sequence(stmts, aliased), aliased)

    return map_sequences(func, fuse_then_contract)


FRAGMENT_LOOPS_FUSED = Property(
    "fragment_loops_fused",
    "adjacent parallel nests over sliced fragments run as one nest",
)
FUSE_FRAGMENT_LOOPS = function_pass(
    fuse_fragment_loops, needs={TILE_OPS_LOWERED, PARALLEL_NESTS}, guarantees={FRAGMENT_LOOPS_FUSED}
)
