"""Pass ``split_dynamic_tails``: a predicate-free main path for guarded parallel nests.

Needs: lowered tile ops (``lower_tile_ops``): parallel nests whose accesses near a
buffer's edge are guarded by ``IfThenElse(idx < extent)`` stores and
``if_then_else(idx < extent, load, 0)`` loads, where ``extent`` is a symbolic dim
or the guard depends on the block index (the tail tile of a non-multiple size).

Guarantees: such a nest becomes ``if all_in_bounds: <nest without guards> else:
<original nest>``, where ``all_in_bounds`` is every guard at the nest's last
iteration. A guard may name values computed in the nest (``r = by * 32 + i``
then ``if r < M``, where ``r`` is a one-element local buffer stored once at the
top of the nest body before the guard, or a ``Bind``): such a name is replaced by
its definition in the hoisted condition; a guard that still reads a buffer written
in the nest, or a variable bound in it, is never hoisted, since the condition
would then read a value outside the scope that defines it. The split is made
only when every guard is ``index < bound`` with a loop-invariant bound and the
analyzer proves ``index <= its value at the last iteration`` throughout the nest,
so ``all_in_bounds`` implies every guard in the
main path; otherwise the nest is left alone and the parallel nests inside it (an
imperfect nest's inner loops, whose variables a guard may use) are considered in
turn. Variables and buffers bound in the main path are renamed (both branches
stay SSA). Semantics are unchanged; full tiles
run the unguarded (vectorizable) loop and only the tail tile pays for
predicates.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ._named_values import NamedValues, is_scalar_local
from ._traverse import loop_over, mutate
from .infer_layout import is_parallel, parallel_nest
from .pipeline import function_pass
from .properties import PARALLEL_NESTS, TAILS_SPLIT, TILE_OPS_LOWERED


def _guards(body: Any) -> list[Any]:
    found: list[Any] = []

    def on_if(node: Any) -> None:
        if node.else_case is None:
            found.append(node.condition)

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name).endswith("if_then_else"):
            found.append(call.args[0])

    tvm_ffi.structural_walk(body, [(tirx.IfThenElse, on_if), (ir.Call, on_call)])
    return found


def _conjuncts(cond: Any) -> list[Any]:
    if type(cond).__name__ == "And":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _strip(body: Any, guards: list[Any]) -> Any:
    def known(cond: Any) -> bool:
        return any(cond.same_as(g) for g in guards)

    def on_if(node: Any, m: Any) -> Any:
        if node.else_case is None and known(node.condition):
            return m.mutate(node.then_case)
        return m.default_mutate(node)

    def on_call(call: Any) -> Any:
        if isinstance(call.op, ir.Op) and str(call.op.name).endswith("if_then_else") and known(call.args[0]):
            return call.args[1]
        return call

    stripped = mutate(body, [(tirx.IfThenElse, on_if)])
    return tvm_ffi.structural_map(stripped, (ir.Call, on_call))


def _uses_outside(cond: Any, loop_vars: list[Any]) -> bool:
    outside: list[Any] = []

    def on_var(v: Any) -> None:
        if not any(v.same_as(lv) for lv in loop_vars):
            outside.append(v)

    tvm_ffi.structural_walk(cond, (ir.Var, on_var))
    return bool(outside)


def _free_of(expr: Any, loop_vars: list[Any]) -> bool:
    hit = tvm_ffi.structural_walk(
        expr,
        (ir.Var, lambda v: tvm_ffi.VisitInterrupt(True) if any(v.same_as(lv) for lv in loop_vars) else None),
    )
    return hit is None


def _written_buffers(body: Any) -> list[Any]:
    written: list[Any] = []
    tvm_ffi.structural_walk(
        body,
        [
            (tirx.BufferStore, lambda s: written.append(s.buffer)),
            (tirx.AllocBuffer, lambda s: written.append(s.buffer)),
        ],
    )
    return written


def _reads_any(expr: Any, buffers: list[Any]) -> bool:
    def on_load(load: Any) -> Any:
        return tvm_ffi.VisitInterrupt(True) if any(load.source.same_as(b) for b in buffers) else None

    return tvm_ffi.structural_walk(expr, (ir.TensorLoad, on_load)) is not None


def _resolved_guards(body: Any) -> list[tuple[Any, Any]]:
    """Each guard of ``body`` paired with the same condition over the values it names.

    A name defined at the top of the nest body before the statement holding the guard
    (a ``Bind``, or the only store into a one-element local buffer) is replaced by its
    definition, so the condition no longer depends on a scope inside the nest.
    """
    stores: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.BufferStore, lambda s: stores.append(s.buffer)))
    names = NamedValues()
    pairs: list[tuple[Any, Any]] = []
    for stmt in list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]:
        pairs += [(g, names.substitute(g)) for g in _guards(stmt)]
        if isinstance(stmt, tirx.Bind):
            names.bind(stmt.var, stmt.value)
        elif (
            isinstance(stmt, tirx.BufferStore)
            and is_scalar_local(stmt.buffer)
            and sum(1 for buf in stores if buf.same_as(stmt.buffer)) == 1
        ):
            names.store(stmt.buffer, stmt.value)
    return pairs


def split_nest(loop: Any) -> Any | None:
    """The split form of the parallel nest rooted at ``loop``, or ``None`` if it does not apply."""
    nest = parallel_nest(loop)
    loop_vars = [lp.loop_var for lp in nest]
    pairs = _resolved_guards(nest[-1].body)
    guards = [original for original, _ in pairs]
    if not guards or not all(_uses_outside(g, loop_vars) for _, g in pairs):
        return None
    inner: list[Any] = []  # variables bound inside the nest's body (an imperfect nest's inner loops)
    tvm_ffi.structural_walk(
        nest[-1].body,
        [(tirx.For, lambda s: inner.append(s.loop_var)), (tirx.Bind, lambda s: inner.append(s.var))],
    )
    written = _written_buffers(nest[-1].body)
    if not all(_free_of(g, inner) and not _reads_any(g, written) for _, g in pairs):
        return None  # such a guard cannot be hoisted; its own inner nest may still split
    analyzer = tvm.sym.Analyzer()
    for lp in nest:
        analyzer.bind(lp.loop_var, ir.Range(lp.min, lp.min + lp.extent))
    last = {lp.loop_var: lp.min + lp.extent - 1 for lp in nest}

    def at_last(e: Any) -> Any:
        return tvm_ffi.structural_map(
            e, (ir.Var, lambda v: next((x for k, x in last.items() if v.same_as(k)), v))
        )

    parts: list[Any] = []
    for _, guard in pairs:
        for cond in _conjuncts(guard):
            if type(cond).__name__ not in ("LT", "LE"):
                return None
            if not _free_of(cond.b, loop_vars) or not analyzer.can_prove(cond.a <= at_last(cond.a)):
                return None  # the bound moves with the loop, or the index is not maximal at the end
            parts.append(at_last(cond))
    # Each guard is `a < b` (or <=) with `b` loop-invariant and `a <= a_last` proven for
    # every iteration, so `a_last < b` implies the guard everywhere in the nest.
    whole = parts[0]
    for part in parts[1:]:
        whole = tirx.And(whole, part)
    main = _fresh_vars(_strip(loop, guards))
    return tirx.IfThenElse(analyzer.simplify(whole), main, loop)


def _fresh_vars(stmt: Any) -> Any:
    """``stmt`` with every variable and buffer it binds renamed, so both branches stay SSA."""
    bound: list[Any] = []
    allocated: list[Any] = []  # a buffer is a variable in TVM 0.27: allocating it defines it
    tvm_ffi.structural_walk(
        stmt,
        [
            (tirx.For, lambda s: bound.append(s.loop_var)),
            (tirx.Bind, lambda s: bound.append(s.var)),
            (tirx.AllocBuffer, lambda s: allocated.append(s.buffer)),
        ],
    )
    fresh = [(old, tirx.Var(str(old), str(old.ty))) for old in bound]
    fresh += [
        (b, tirx.decl_buffer(b.shape, b.dtype, name=str(b.name), scope=str(b.scope()))) for b in allocated
    ]

    def swap(v: Any) -> Any:
        return next((new for old, new in fresh if v.same_as(old)), v)

    return tvm_ffi.structural_map(stmt, (ir.Var, swap))


def _split_func(func: Any) -> Any:
    """Split guarded parallel nests into an unguarded main path and the guarded tail."""

    def on_for(loop: Any, m: Any) -> Any:
        if not is_parallel(loop):
            return m.default_mutate(loop)
        split = split_nest(loop)
        if split is not None:
            return split
        # Left alone: only the nests inside its innermost body are candidates. An inner loop
        # of the nest itself is not (split there, its guard on an outer loop's variable would
        # put an `if` between the nest's loops, which then bind to threads as two nests).
        nest = parallel_nest(loop)
        body = m.mutate(nest[-1].body)
        for lp in reversed(nest):
            body = loop_over(lp, body)
        return body

    return func.with_body(mutate(func.body, [(tirx.For, on_for)]))


SPLIT_DYNAMIC_TAILS = function_pass(
    _split_func, name="split_dynamic_tails", needs={TILE_OPS_LOWERED, PARALLEL_NESTS},
    guarantees={TAILS_SPLIT})  # fmt: skip
split_dynamic_tails = SPLIT_DYNAMIC_TAILS.run
