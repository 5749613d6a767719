"""The names a kernel gives values, and the expressions they stand for.

A kernel names a value two ways: a ``Bind`` (``off: T.let = ko * 32``) and a one-element
local buffer stored once (``idx = i * K + j`` in a ``T.Parallel`` body, or a ``T.alloc_var``
assigned once). Passes that move or rewrite an expression out of its names' scope put each
name's expression in its place (:class:`NamedValues`).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]


def is_scalar_local(buffer: Any) -> bool:
    """Whether ``buffer`` is a one-element local buffer (a named value or a ``T.alloc_var``)."""
    shape = list(buffer.shape)
    one = len(shape) == 1 and isinstance(shape[0], tirx.IntImm) and int(shape[0]) == 1
    return str(buffer.scope()) == "local" and one


class NamedValues:
    """Bind variables and once-stored scalar buffers with their expressions, in program order;
    :meth:`substitute` puts the expressions in place of the names.

    Two tables: a load's buffer variable is ``same_as`` its buffer, so one table would also
    replace the variable inside each load it names.
    """

    def __init__(self) -> None:
        self.bound: list[tuple[Any, Any]] = []  # a Bind's variable -> its expression
        self.stored: list[tuple[Any, Any]] = []  # a scalar buffer stored once -> its expression

    def bind(self, var: Any, value: Any) -> None:
        """Record ``var``'s value, with the names before it substituted."""
        self.bound.append((var, self.substitute(value)))

    def store(self, buffer: Any, value: Any) -> None:
        """Record the value of ``buffer``'s one store, with the names before it substituted."""
        self.stored.append((buffer, self.substitute(value)))

    def __bool__(self) -> bool:
        return bool(self.bound or self.stored)

    def substitute(self, expr: Any) -> Any:
        """``expr`` with every recorded name replaced by its expression."""

        def on_load(load: Any) -> Any:
            return next((v for k, v in self.stored if load.source.same_as(k)), load)

        def on_var(var: Any) -> Any:
            return next((v for k, v in self.bound if var.same_as(k)), var)

        return tvm_ffi.structural_map(expr, [(ir.TensorLoad, on_load), (ir.Var, on_var)])


__all__ = ["NamedValues", "is_scalar_local"]
