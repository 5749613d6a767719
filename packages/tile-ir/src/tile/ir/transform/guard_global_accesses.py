"""Pass ``guard_global_accesses``: an access to a global tensor outside its shape does nothing.

TileLang's rule, which its programs rely on (its grouped GEMM stores a 64-column tile into a
96-column output with a row guard only): a store to a global tensor whose index the analyzer
cannot prove inside the tensor runs under ``if index < extent`` (and ``0 <= index`` where
that is not proven either), and such a load reads ``if_then_else(in bounds, load, 0)``
instead of the memory next to the tensor. Without it the store lands in whatever follows
the tensor: another tensor on a GPU, the allocator's bookkeeping on the CPU (the process
aborts). Indices are proven against the loops' ranges, the block and thread indices, the
enclosing ``if`` conditions and ``if_then_else`` branches, so tile operators' own guarded
accesses and every access of a tile that divides its tensor stay as they are.

The guards have the forms tile's ``T.copy`` lowering writes, so ``split_dynamic_tails``
(the next pass) gives a guarded ``T.Parallel`` nest an unguarded main path for whole tiles.
Scalar accesses only: a vector access (``Ramp`` index) comes from a tile operator's
lowering, which guards its own. Shared and register buffers are left alone (TileLang too).
A load whose tensor has a ``T.annotate_safe_value`` already reads that value outside.

``pass_configs={"tl.disable_safe_memory_legalize": True}`` (TileLang's key) turns the pass
off for a kernel: its accesses then run as written, and ``TILE_CHECK=1`` reports those that
fall outside.

Needs: tile ops lowered (the accesses they make are plain loads and stores), parallel nests
still marked. Guarantees: ``GLOBAL_ACCESSES_GUARDED``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import ir, tirx

from ._traverse import mutate
from .pipeline import CompileContext, Property, context_function_pass
from .properties import PARALLEL_NESTS, TILE_OPS_LOWERED

DISABLE_SAFE_MEMORY = "tl.disable_safe_memory_legalize"
"""Target option (TileLang's pass-config key): "1" leaves every access as written."""

_POINTER_CALLS = ("address_of", "access_ptr", "region")
"""Calls whose load operand names an address, not a value read: never rewritten."""


def _is_global(buffer: Any) -> bool:
    return str(buffer.scope()) == "global"


def _scalar(expr: Any) -> bool:
    return int(tvm.DataType(str(expr.ty)).lanes) == 1


def _outside(indices: list[Any], shape: list[Any], analyzer: Any) -> list[Any]:
    """The bounds ``analyzer`` cannot prove for ``indices``: ``index < extent`` and
    ``0 <= index`` conditions, upper bounds first."""
    upper: list[Any] = []
    lower: list[Any] = []
    for index, extent in zip(indices, shape, strict=True):
        if isinstance(index, tirx.IntImm) or not _scalar(index):
            continue
        bound = extent if str(extent.ty) == str(index.ty) else tirx.Cast(str(index.ty), extent)
        below = tirx.LT(index, bound)
        if not analyzer.can_prove(below):
            upper.append(below)
        at_least = tirx.LE(tirx.const(0, str(index.ty)), index)
        if not analyzer.can_prove(at_least):
            lower.append(at_least)
    return upper + lower


def _all(conds: list[Any]) -> Any:
    whole = conds[0]
    for cond in conds[1:]:
        whole = tirx.And(whole, cond)
    return whole


def _guard_func(func: Any, ctx: CompileContext) -> Any:
    """Guard each global access the analyzer cannot prove in bounds (see module docstring)."""
    if (ctx.target.option(DISABLE_SAFE_MEMORY) or "0").lower() in ("1", "true"):
        return func
    analyzer = tvm.sym.Analyzer()

    def bind(var: Any, value: Any) -> None:
        with contextlib.suppress(Exception):  # a value the analyzer cannot take: no fact, no harm
            analyzer.bind(var, value, allow_override=True)

    def on_for(node: Any, m: Any) -> Any:
        bind(node.loop_var, ir.Range(node.min, node.min + node.extent))
        return m.default_mutate(node)

    def on_attr(node: Any, m: Any) -> Any:
        if str(node.attr_key) == "thread_extent":
            bind(node.node.var, ir.Range(0, node.value))
        return m.default_mutate(node)

    def on_bind(node: Any, m: Any) -> Any:
        new = m.default_mutate(node)
        bind(node.var, node.value)
        return new

    def on_if(node: Any, m: Any) -> Any:
        cond = m.mutate(node.condition)
        with analyzer.constraint_scope(node.condition):
            then = m.mutate(node.then_case)
        other = None
        if node.else_case is not None:
            with analyzer.constraint_scope(tirx.Not(node.condition)):
                other = m.mutate(node.else_case)
        if cond.same_as(node.condition) and then.same_as(node.then_case) and (
            other is None or other.same_as(node.else_case)
        ):
            return node
        return tirx.IfThenElse(cond, then, other, span=node.span)

    def on_call(node: Any, m: Any) -> Any:
        name = str(node.op.name) if isinstance(node.op, ir.Op) else ""
        if any(part in name for part in _POINTER_CALLS):
            return node
        if name.endswith("if_then_else"):
            cond, then, other = node.args
            new_cond = m.mutate(cond)
            with analyzer.constraint_scope(cond):
                new_then = m.mutate(then)
            with analyzer.constraint_scope(tirx.Not(cond)):
                new_other = m.mutate(other)
            if new_cond.same_as(cond) and new_then.same_as(then) and new_other.same_as(other):
                return node
            return tirx.if_then_else(new_cond, new_then, new_other)
        return m.default_mutate(node)

    def on_load(node: Any, m: Any) -> Any:
        new = m.default_mutate(node)
        buffer = node.source
        if not _is_global(buffer) or not _scalar(node) or len(node.indices) != len(buffer.shape):
            return new
        conds = _outside(list(new.indices), list(buffer.shape), analyzer)
        if not conds:
            return new
        return tirx.if_then_else(_all(conds), new, tirx.const(0, str(buffer.dtype)))

    def on_store(node: Any, m: Any) -> Any:
        buffer = node.buffer
        if not _is_global(buffer) or not _scalar(node.value) or len(node.indices) != len(buffer.shape):
            return m.default_mutate(node)
        indices = [m.mutate(index) for index in node.indices]
        conds = _outside(indices, list(buffer.shape), analyzer)
        if not conds:
            return m.default_mutate(node)
        # the value under the store's own guard: a read-modify-write's load of the same element
        # (T.atomic_add's B[i] = B[i] + v, which lower_gpu_atomics matches) needs no guard of its own
        guard = _all(conds)
        with analyzer.constraint_scope(guard):
            value = m.mutate(node.value)
        store = tirx.BufferStore(buffer, value, indices, span=node.span)
        return tirx.IfThenElse(guard, store, None, span=node.span)

    callbacks = [
        (tirx.For, on_for),
        (tirx.AttrStmt, on_attr),
        (tirx.Bind, on_bind),
        (tirx.IfThenElse, on_if),
        (tirx.BufferStore, on_store),
        (ir.TensorLoad, on_load),
        (ir.Call, on_call),
    ]
    return func.with_body(mutate(func.body, callbacks))


GLOBAL_ACCESSES_GUARDED = Property(
    "global_accesses_guarded",
    "a scalar global access the analyzer cannot prove in bounds runs under its bounds",
)
GUARD_GLOBAL_ACCESSES = context_function_pass(
    _guard_func,
    name="guard_global_accesses",
    needs={TILE_OPS_LOWERED, PARALLEL_NESTS},
    guarantees={GLOBAL_ACCESSES_GUARDED},
)
guard_global_accesses = GUARD_GLOBAL_ACCESSES.run
