"""Pass ``lower_device_prints``: ``T.print`` and ``T.device_assert`` as ``printf`` on SIMT targets.

Needs: bound threads (``bind_parallel_loops``) and lowered fragments
(``lower_fragments``); ``T.print`` calls as the front end emits them, packed calls
``DEBUG_PRINT(msg, bx, by, bz, label, value, *index)`` with ``value`` cast to
``float64`` or ``int64``.

Guarantees: each such call becomes ``if <thread 0 of the block>: printf(fmt, ...)``
(a call the lowering already put under a test of the thread index, such as an
element of a fragment, printed by the thread holding it, keeps that test instead)
with a constant format that prints what the CPU backend prints through its packed
call (``[block (x, y, z)] msg: label[i, j] = value``, or ``[block (x, y, z)] msg`` for a
message alone, whose label is empty), so a kernel prints the same
lines on every target. A failed ``T.device_assert`` (the packed call ``DEVICE_ASSERT(msg, site,
bx, by, bz)``) becomes a ``printf`` of ``[block (x, y, z) thread (x, y, z)]
T.device_assert failed at file:line: msg`` and ``tile::device_trap(report)``, which
stops the kernel (the emulator reports the same text as the block's fault). No packed
call to either is left (SIMT code generators cannot emit packed calls). Idempotent: a
module without such calls is returned unchanged.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import DEBUG_PRINT, DEVICE_ASSERT
from ._traverse import mutate
from .pipeline import Property, function_pass
from .properties import FRAGMENTS_LOWERED, PARALLEL_LOOPS_SCHEDULED


def _packed_name(call: Any) -> str | None:
    if not (isinstance(call, ir.Call) and isinstance(call.op, ir.Op)):
        return None
    if not str(call.op.name).endswith("tvm_call_packed") or not call.args:
        return None
    name = call.args[0]
    return str(name.value) if isinstance(name, ir.StringImm) else None


def _is_print(call: Any) -> bool:
    return _packed_name(call) == DEBUG_PRINT


def _assert_failed(call: Any, threads: list[Any]) -> Any:
    msg, site, bx, by, bz = call.args[1:]
    where = _text(site)
    parts = where.split(":")
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2].isdigit():
        where = ":".join(parts[:-1])  # file:line (the column is noise in a report)
    report = f"T.device_assert failed at {where}: {_text(msg) or '(no message)'}"
    tids = [tirx.Cast("int32", t) for t in threads] + [tirx.const(0, "int32")] * (3 - len(threads))
    fmt = "[block (%d, %d, %d) thread (%d, %d, %d)] " + report + "\\n"
    printed = tirx.call_extern(
        "int32", "printf", ir.StringImm(fmt), *[tirx.Cast("int32", b) for b in (bx, by, bz)], *tids[:3]
    )
    trap = tirx.call_extern("void", "tile::device_trap", ir.StringImm(report.replace("%%", "%")))
    return tirx.SeqStmt([tirx.Evaluate(printed), tirx.Evaluate(trap)])


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
    blocks = [tirx.Cast("int32", e) for e in (bx, by, bz)]
    if not _text(label):  # a message alone
        fmt = "[block (%d, %d, %d)] " + _text(msg) + "\\n"
        return tirx.call_extern("int32", "printf", ir.StringImm(fmt), *blocks)
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
    """Turn ``T.print``'s packed calls into ``printf`` calls of each block's first thread."""
    threads = _thread_vars(func)
    first: Any = None
    for tx in threads:
        zero = tirx.EQ(tx, tirx.const(0, str(tx.ty)))
        first = zero if first is None else tirx.And(first, zero)

    def lower(stmt: Any, guard: Any) -> Any:
        def on_evaluate(node: Any, m: Any) -> Any:
            if _packed_name(node.value) == DEVICE_ASSERT:
                return _assert_failed(node.value, threads)
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


DEVICE_PRINTS_LOWERED = Property(
    "device_prints_lowered", "every T.print is a printf of the thread that holds the value"
)
LOWER_DEVICE_PRINTS = function_pass(
    _lower_func, name="lower_device_prints", needs={PARALLEL_LOOPS_SCHEDULED, FRAGMENTS_LOWERED},
    guarantees={DEVICE_PRINTS_LOWERED})  # fmt: skip
lower_device_prints = LOWER_DEVICE_PRINTS.run
