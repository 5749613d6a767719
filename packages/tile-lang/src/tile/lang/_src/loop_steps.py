"""Loops that count down: ``for i in range(10, 0, -1)`` in a kernel, as in Python.

apache-tvm 0.27 keeps a loop's step in the ``For`` node and requires it positive. A loop with a
constant negative step ``s`` from ``start`` towards ``stop`` is rewritten after the parse into a
count-up loop over its trips, ``for k in range(max(0, ceildiv(start - stop, -s)))``, whose
body reads ``i = start + k * s``: the values Python's ``range`` gives, in its order.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]


def _negative_step(loop: Any) -> int | None:
    step = getattr(loop, "step", None)
    if isinstance(step, tirx.IntImm) and int(step.value) < 0:
        return int(step.value)
    return None


def count_up(body: Any) -> Any:
    """``body`` with every constant negative-step loop counting up over its trips instead."""

    def on_for(loop: Any) -> Any:
        step = _negative_step(loop)
        if step is None:
            return loop
        dtype = str(loop.loop_var.ty)
        down = tirx.const(-step, dtype)
        span = tirx.const(0, dtype) - loop.extent  # start - stop: the extent is stop - start
        trips = tirx.max(tirx.const(0, dtype), tirx.floordiv(span + down - tirx.const(1, dtype), down))
        k = tirx.Var(f"{loop.loop_var.name}_trip", dtype)
        value = loop.min + k * tirx.const(step, dtype)
        old = loop.loop_var
        inner = tvm_ffi.structural_map(loop.body, (ir.Var, lambda v: value if v.same_as(old) else v))
        zero = tirx.const(0, dtype)
        return tirx.For(k, zero, trips, loop.kind, inner, loop.thread_binding, loop.annotations)

    return tvm_ffi.structural_map(body, (tirx.For, on_for))
