"""``tvm_ffi`` traversals that let ``TileError`` through.

An exception raised inside a ``structural_mutate``/``structural_map`` callback
crosses the FFI and comes back as a plain ``RuntimeError`` with the text folded in.
These wrappers remember the ``TileError`` a callback raised and re-raise it as is,
so users see the typed error with its location and hint.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import tvm_ffi

from ..errors import TileError

Callback = tuple[type, Callable[..., Any]]


def _guarded(callbacks: Sequence[Callback], box: list[TileError]) -> list[Callback]:
    def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
        arity = len(inspect.signature(fn).parameters)

        def call(*args: Any) -> Any:
            try:
                return fn(*args[:arity])
            except TileError as exc:
                box.append(exc)
                raise

        return call

    return [(kind, guard(fn)) for kind, fn in callbacks]


def _reraising(traversal: Callable[[Any, Any], Any], root: Any, callbacks: Sequence[Callback]) -> Any:
    box: list[TileError] = []
    try:
        return traversal(root, _guarded(callbacks, box))
    except Exception:
        if box:
            raise box[0] from None
        raise


def mutate(root: Any, callbacks: Sequence[Callback]) -> Any:
    """``tvm_ffi.structural_mutate`` that re-raises a callback's ``TileError`` unchanged."""
    return _reraising(tvm_ffi.structural_mutate, root, callbacks)


def map_nodes(root: Any, callbacks: Sequence[Callback]) -> Any:
    """``tvm_ffi.structural_map`` that re-raises a callback's ``TileError`` unchanged."""
    return _reraising(tvm_ffi.structural_map, root, callbacks)
