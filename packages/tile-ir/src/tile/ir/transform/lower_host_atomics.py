"""Pass ``lower_host_atomics``: a thread's atomic on one element, for targets that run a block as one thread.

For the CPU. Needs: the value-returning atomics of the language as calls
(``T.atomic_add/max/min(A[i], v, return_prev=True)`` are ``tile::atomic_<kind>``,
``T.atomic_or/and/xor(A[i], v)`` are ``atomicOr/And/Xor``, each ``call_extern(dtype,
name, address_of(A[i]), v)``), before ``T.Parallel`` loops are scheduled. Guarantees:
no such call is left. Each becomes the plain update under the ``ATOMIC_UPDATE`` marker
of ``tile.ir.ops.atomic``, so the contract of the tile operator's scalar form holds:

    prev = A[i]                   # the value the call returns
    A[i] = kind(prev, v)
    <the statement that held the call, reading prev>

inside a one-trip serial loop (which keeps an enclosing ``T.Parallel`` loop out of
vector lanes, as the scalar ``T.atomic_*`` does) and the marker, which makes
``serialize_block_grid`` run the blocks one after another when ``A`` is global. A
block is one thread here and blocks run in turn, so the update is atomic and
``prev`` is the value before it, as on a GPU. Several calls in one statement update
in evaluation order (operands first, then left to right). A call in a ``while``
condition (evaluated on every trip) is refused with ``UnsupportedOnTargetError``.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import THREAD_ATOMICS
from ..errors import UnsupportedOnTargetError
from ..ops.atomic import ATOMIC_UPDATE, atomic_combine
from ._traverse import map_nodes, mutate
from .pipeline import function_pass
from .serialize_block_grid import first_location

HOST_ATOMIC_CALLS = {
    "tile::atomic_add": "add",
    "tile::atomic_max": "max",
    "tile::atomic_min": "min",
    "atomicOr": "or",
    "atomicAnd": "and",
    "atomicXor": "xor",
}
"""The extern names of the language's per-thread atomics, and the update each makes."""


def _parse(call: Any) -> tuple[str, Any, Any] | None:
    """``(kind, element load, value)`` of a per-thread atomic call, else ``None``."""
    if not (isinstance(call, tirx.Call) and isinstance(call.op, ir.Op)):
        return None
    if str(call.op.name) != "tirx.call_extern":
        return None
    kind = HOST_ATOMIC_CALLS.get(str(call.args[0].value)) if len(call.args) == 3 else None
    address = call.args[1] if kind else None
    if not (isinstance(address, tirx.Call) and str(address.op.name) == "tirx.address_of"):
        return None
    return kind, address.args[0], call.args[2]  # type: ignore[return-value]


def has_host_atomic(node: Any) -> bool:
    """Whether ``node`` calls one of the per-thread atomics (``HOST_ATOMIC_CALLS``)."""
    hit = tvm_ffi.structural_walk(
        node, (tirx.Call, lambda c: tvm_ffi.VisitInterrupt(True) if _parse(c) else None)
    )
    return hit is not None


def _hoist(expr: Any, updates: list[tuple[Any, Any, str, Any]]) -> Any:
    """``expr`` with each atomic call replaced by the variable holding its old value;
    the updates are appended to ``updates`` in evaluation order (post-order)."""

    def on_call(call: Any) -> Any:
        parsed = _parse(call)
        if parsed is None:
            return call
        kind, load, value = parsed
        prev = tirx.Var(f"{load.source.name}_prev", str(load.ty))
        updates.append((prev, load, kind, value))
        return prev

    return map_nodes(expr, [(tirx.Call, on_call)])


def _updated(updates: list[tuple[Any, Any, str, Any]], rest: Any | None) -> Any:
    """The updates, each under its marker, then ``rest`` (in the innermost marker's scope,
    so every ``prev`` is bound where it is read), in one serial one-trip loop."""
    body = rest
    for prev, load, kind, value in reversed(updates):
        store = tirx.BufferStore(load.source, atomic_combine(kind, prev, value), list(load.indices))
        stmts = [tirx.Bind(prev, load), store, *([body] if body is not None else [])]
        body = tirx.AttrStmt(load.source, ATOMIC_UPDATE, tirx.const(1, "int32"), tirx.SeqStmt(stmts))
    once = tirx.Var("atomic_once", "int32")
    return tirx.For(once, 0, 1, tirx.ForKind.SERIAL, body)


def _lower(func: Any) -> Any:
    """Lower every per-thread atomic call to a marked plain update (see module docstring)."""
    if not has_host_atomic(func.body):
        return func

    def rebuild(stmt: Any, fields: list[Any], make: Any) -> Any:
        """``stmt`` as the updates of the atomics in its own ``fields``, then ``make(*fields')``
        (the statement reading their old values; ``None``: nothing left to run)."""
        if not any(has_host_atomic(f) for f in fields):
            return stmt
        updates: list[tuple[Any, Any, str, Any]] = []
        return _updated(updates, make(*[_hoist(f, updates) for f in fields]))

    def on_store(node: Any, m: Any) -> Any:
        return rebuild(node, [node.value, *node.indices],
                       lambda v, *idx: tirx.BufferStore(node.buffer, v, list(idx)))  # fmt: skip

    def on_bind(node: Any, m: Any) -> Any:
        # a Bind's scope is the rest of its block: the value leaves the update's loop in a local
        holder = tirx.decl_buffer((1,), str(node.var.ty), name=f"{node.var.name}_value", scope="local")
        updated = rebuild(node, [node.value], lambda v: tirx.BufferStore(holder, v, [0]))
        if updated is node:
            return node
        bind = tirx.Bind(node.var, tirx.BufferLoad(holder, [0]))
        return tirx.SeqStmt([tirx.AllocBuffer(holder), updated, bind])

    def on_evaluate(node: Any, m: Any) -> Any:  # T.atomic_or(A[i], v) alone leaves nothing to run
        return rebuild(node, [node.value], lambda v: None if isinstance(v, tirx.Var) else tirx.Evaluate(v))

    def on_if(node: Any, m: Any) -> Any:
        node = m.default_mutate(node)
        return rebuild(node, [node.condition], lambda c: tirx.IfThenElse(c, node.then_case, node.else_case))

    def on_for(node: Any, m: Any) -> Any:
        node = m.default_mutate(node)

        def loop(lo: Any, extent: Any) -> Any:
            return tirx.For(
                node.loop_var, lo, extent, node.kind, node.body, node.thread_binding, node.annotations
            )

        return rebuild(node, [node.min, node.extent], loop)

    def on_while(node: Any, m: Any) -> Any:
        if has_host_atomic(node.condition):
            raise UnsupportedOnTargetError(
                "an atomic that returns the old value in a while condition: the CPU backend updates "
                "before the statement that reads the value, and a while condition is read on every trip",
                hint="assign the old value to a variable inside the loop and test that variable",
                location=first_location(func, THREAD_ATOMICS),
            )
        return m.default_mutate(node)

    body = mutate(
        func.body,
        [
            (tirx.BufferStore, on_store),
            (tirx.Bind, on_bind),
            (tirx.Evaluate, on_evaluate),
            (tirx.IfThenElse, on_if),
            (tirx.For, on_for),
            (tirx.While, on_while),
        ],
    )
    return func.with_body(body)


LOWER_HOST_ATOMICS = function_pass(_lower, name="lower_host_atomics")
lower_host_atomics = LOWER_HOST_ATOMICS.run
