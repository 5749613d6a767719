"""TileLang's ``tilelang.transform.simplify`` names: ``apply_simplify``, ``simplify_prim_func``.

TileLang programs simplify a kernel before they compile it. tile's compiler folds constants
and simplifies loop bounds and tile regions of every kernel it compiles (the ``normalize``
pass of ``tile.ir.transform``), so here the kernel comes back as built, and the compiled
kernel is the same either way.

Example::

    >>> from tile.lang.transform.simplify import apply_simplify
    >>> apply_simplify(None) is None  # any kernel, module or value comes back unchanged
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["apply_simplify", "simplify_prim_func"]

_Kernel = TypeVar("_Kernel")


def apply_simplify(func: _Kernel, *_options: Any, **_keywords: Any) -> _Kernel:
    """``func`` (a ``@T.prim_func`` kernel or an ``IRModule``) as built: tile simplifies each
    kernel when it compiles it. TileLang's options (``include_outputs`` ...) are accepted."""
    return func


def simplify_prim_func(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``'s kernels as built: tile's compiler simplifies each kernel it compiles."""
    return func
