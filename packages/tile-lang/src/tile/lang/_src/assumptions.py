"""``T.assume`` conditions the host can check before a call.

``T.assume(cond)`` tells the compiler that ``cond`` holds, and the generated code may rely on it
(a bounds check dropped, a loop split without its tail). When ``cond`` reads only the kernel's
symbolic dims (``N = T.dynamic("N")``, bound from the tensors' shapes) and scalar parameters, a
call can check it before the kernel runs: a call that breaks it gets a typed error at the
``T.assume`` line instead of a wrong result, as TileLang raises a ``RuntimeError`` for it.
Conditions that read anything else (a loop variable, a loaded value) stay compile-time hints.

The condition is turned once into a Python closure over the few integer operations TVM's
arithmetic has (``+ - * // % / min max``, comparisons, ``and or not``); an operation outside
that set leaves the condition unchecked, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import Any

from tile.ir.errors import SourceLocation, location_from_span

from ..errors import KernelAssumptionError
from .arguments import ParamSpec

Env = Mapping[str, int]
Closure = Callable[[Env], int]


@dataclasses.dataclass(frozen=True)
class HostAssumption:
    """One checkable ``T.assume``: its text, where it is, and what it reads."""

    text: str
    location: SourceLocation | None
    names: tuple[str, ...]
    """The dims and scalar parameters it reads, in the order they are shown in a failure."""
    reads_scalars: bool
    holds: Closure

    @property
    def needs_every_call(self) -> bool:
        """Whether the per-signature fast paths must not skip it: it reads a scalar (not part of
        a signature) or is false whatever the call passes."""
        return self.reads_scalars or not self.names

    def check(self, values: Env, kernel: str) -> None:
        """Raise ``KernelAssumptionError`` if the condition is false for ``values``; do nothing
        when a name it reads has no value (a dim that only an output's shape has)."""
        if any(name not in values for name in self.names):
            return
        try:
            ok = bool(self.holds(values))
        except ZeroDivisionError:
            ok = False
        if ok:
            return
        if self.names:
            given = "for " + ", ".join(f"{name} = {values[name]}" for name in self.names)
        else:
            given = "for any arguments (it reads only static sizes)"
        where = f" (line {self.location.line})" if self.location is not None else ""
        raise KernelAssumptionError(
            f"Assume: {self.text} does not hold {given}: kernel {kernel} was compiled relying on "
            f"this T.assume{where}",
            hint="pass tensors and scalars that satisfy the assumption, or remove the T.assume "
            "(the kernel then handles every size)",
            location=self.location,
        )


def host_assumptions(func: Any, params: list[ParamSpec]) -> list[HostAssumption]:
    """The ``T.assume`` conditions of ``func`` that read only its symbolic dims and scalar
    parameters, in source order."""
    import tvm_ffi
    from tvm import tirx  # type: ignore[import-untyped]

    known: dict[str, Any] = {}  # name -> the Var, for the dims of tensor parameters and the scalars
    scalars: set[str] = set()
    for param, spec in zip(func.params, params, strict=True):
        if spec.is_tensor:
            for dim in param.shape:
                if isinstance(dim, tirx.Var):
                    known.setdefault(str(dim.name), dim)
        else:
            known[spec.name] = param
            scalars.add(spec.name)
    found: list[Any] = []

    def visit(call: Any) -> None:
        if getattr(call.op, "name", None) == "tirx.assume" and len(call.args) == 1:
            found.append(call)

    tvm_ffi.structural_walk(func.body, [(tirx.Call, visit)], order="pre")
    result = []
    for call in found:
        condition = call.args[0]
        reads: list[str] = []
        try:
            holds = _closure(condition, known, reads)
        except _NotHostEvaluable:
            continue
        names = tuple(dict.fromkeys(reads))
        if not names and _holds_now(holds):
            continue  # a constant that holds (static sizes that satisfy it)
        result.append(HostAssumption(str(condition), location_from_span(call.span), names,
                                     any(n in scalars for n in names), holds))
    return result


def check_assumptions(
    assumptions: list[HostAssumption], params: list[ParamSpec], values: list[Any], dims: Env, kernel: str
) -> None:
    """Check every assumption against a call's bound dims and integer scalar arguments."""
    known = dict(dims)
    for spec, value in zip(params, values, strict=True):
        if not spec.is_tensor:
            with contextlib.suppress(TypeError):
                known[spec.name] = operator.index(value)  # ints, numpy and 0-d torch integers
    for assumption in assumptions:
        assumption.check(known, kernel)


def _holds_now(holds: Closure) -> bool:
    try:
        return bool(holds({}))
    except ZeroDivisionError:
        return False


class _NotHostEvaluable(Exception):
    """The condition reads something other than dims and scalars, or an unknown operation."""


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc_mod(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)


_BINARY: dict[str, Callable[[int, int], int]] = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "FloorDiv": operator.floordiv,
    "FloorMod": operator.mod,
    "Div": _trunc_div,
    "Mod": _trunc_mod,
    "Min": min,
    "Max": max,
    "EQ": operator.eq,
    "NE": operator.ne,
    "LT": operator.lt,
    "LE": operator.le,
    "GT": operator.gt,
    "GE": operator.ge,
}


def _closure(node: Any, known: dict[str, Any], reads: list[str]) -> Closure:
    from tvm import tirx

    kind = type(node).__name__
    if kind == "IntImm":
        value = int(node.value)
        return lambda env: value
    if isinstance(node, tirx.Var):
        name = str(node.name)
        if name not in known or not known[name].same_as(node):
            raise _NotHostEvaluable(name)
        reads.append(name)
        return lambda env: env[name]
    if kind in _BINARY:
        op = _BINARY[kind]
        a, b = _closure(node.a, known, reads), _closure(node.b, known, reads)
        return lambda env: op(a(env), b(env))
    if kind == "And":
        a, b = _closure(node.a, known, reads), _closure(node.b, known, reads)
        return lambda env: bool(a(env)) and bool(b(env))
    if kind == "Or":
        a, b = _closure(node.a, known, reads), _closure(node.b, known, reads)
        return lambda env: bool(a(env)) or bool(b(env))
    if kind == "Not":
        a = _closure(node.a, known, reads)
        return lambda env: not a(env)
    if kind == "Cast" and (str(node.dtype) == "bool" or "int" in str(node.dtype)):
        inner = _closure(node.value, known, reads)
        if str(node.dtype) == "bool":
            return lambda env: bool(inner(env))
        return inner  # between integer types: taken as the identity (a size or scalar fits both)
    raise _NotHostEvaluable(kind)


__all__ = ["HostAssumption", "check_assumptions", "host_assumptions"]
