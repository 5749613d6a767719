"""``named``: give a function made by a factory the public name and docstring it is used by."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def named(fn: F, name: str, doc: str) -> F:
    """``fn`` renamed to ``name`` (``__name__`` and ``__qualname__``) with docstring ``doc``."""
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn
