"""Pass ``lower_device_prints``: ``T.print`` as a ``printf`` of thread 0 on SIMT targets.

Needs: bound threads (``bind_parallel_loops``) and lowered fragments
(``lower_fragments``); ``T.print`` calls as the front end emits them, packed calls
``DEBUG_PRINT(msg, bx, by, bz, label, value, *index)`` with ``value`` cast to
``float64`` or ``int64``.

Guarantees: each such call becomes ``if <thread 0 of the block>: printf(fmt, ...)``
(a call the lowering already put under a test of the thread index, such as an
element of a fragment, printed by the thread holding it, keeps that test instead)
with a constant format that prints what the CPU backend prints through its packed
call (``[block (x, y, z)] msg: label[i, j] = value``), so a kernel prints the same
lines on every target. No packed call to ``DEBUG_PRINT`` is left (SIMT code
generators cannot emit packed calls). Idempotent: a module without such calls is
returned unchanged.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import DEBUG_PRINT
from ._traverse import mutate
from .pipeline import CompileContext, Pass, map_prim_funcs


def _is_print(call: Any) -> bool:
    if not (isinstance(call, ir.Call) and isinstance(call.op, ir.Op)):
        return False
    if not str(call.op.name).endswith("tvm_call_packed") or not call.args:
        return False
    name = call.args[0]
    return isinstance(name, ir.StringImm) and str(name.value) == DEBUG_PRINT


def _text(expr: Any) -> str:
    """The text of a string argument, escaped for a C string literal and for printf."""
    text = str(expr.value) if isinstance(expr, ir.StringImm) else str(expr)
    # The code generators print a StringImm between quotes as it is: escape it here.
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text.replace("%", "%%")


def _value_format(value: Any) -> str:
    if str(value.ty).startswith(("float", "bfloat")):
        source = value.value if isinstance(value, tirx.Cast) else value
        bits = int("".join(ch for ch in str(source.ty) if ch.isdigit()) or 64)
        return "%.17g" if bits > 32 else "%.9g"
    return "%lld"


def _printf(call: Any) -> Any:
    msg, bx, by, bz, label, value, *index = call.args[1:]
    where = _text(label)
    if index:
        where += "[" + ", ".join("%d" for _ in index) + "]"
    prefix = "[block (%d, %d, %d)] " + (_text(msg) + ": " if _text(msg) else "")
    fmt = prefix + where + " = " + _value_format(value) + "\\n"
    as_int = [tirx.Cast("int32", e) for e in (bx, by, bz, *index)]
    return tirx.call_extern("int32", "printf", ir.StringImm(fmt), *as_int[:3], *as_int[3:], value)


def _thread_vars(func: Any) -> list[Any]:
    found: list[Any] = []

    def on_attr(node: Any) -> None:
        if str(node.attr_key) == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx"):
            found.append(node.node.var)

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, on_attr))
    return found


def _uses_any(expr: Any, variables: list[Any]) -> bool:
    def on_var(v: Any) -> Any:
        return tvm_ffi.VisitInterrupt(True) if any(v.same_as(t) for t in variables) else None

    return tvm_ffi.structural_walk(expr, (ir.Var, on_var)) is not None


def _lower_func(func: Any) -> Any:
    threads = _thread_vars(func)
    first: Any = None
    for tx in threads:
        zero = tirx.EQ(tx, tirx.const(0, str(tx.ty)))
        first = zero if first is None else tirx.And(first, zero)

    def lower(stmt: Any, guard: Any) -> Any:
        def on_evaluate(node: Any, m: Any) -> Any:
            if not _is_print(node.value):
                return m.default_mutate(node)
            printed = tirx.Evaluate(_printf(node.value))
            return printed if guard is None else tirx.IfThenElse(guard, printed, None)

        def on_if(node: Any, m: Any) -> Any:
            # A print the lowering already gave to one thread (a fragment element, printed
            # by the thread holding it) keeps that choice: no thread-0 guard inside.
            if guard is not None and _uses_any(node.condition, threads):
                return lower(node, None)
            return m.default_mutate(node)

        callbacks = [(tirx.Evaluate, on_evaluate)]
        return mutate(stmt, callbacks if guard is None else [*callbacks, (tirx.IfThenElse, on_if)])

    return func.with_body(lower(func.body, first))


def lower_device_prints(mod: Any, ctx: CompileContext) -> Any:
    """Turn ``T.print``'s packed calls into ``printf`` calls of each block's first thread."""
    return map_prim_funcs(mod, _lower_func)


LOWER_DEVICE_PRINTS = Pass("lower_device_prints", lower_device_prints)
