"""The names TileLang programs import from ``tilelang.transform``.

``PassConfigKey`` is tile's (``tile.lang.PassConfigKey``: every TileLang key, honoured or
accepted as ``tile.lang._src.pass_config`` says). ``simplify_prim_func`` decorates a
function that builds a kernel; tile simplifies every kernel when it compiles it, so the
kernel comes back as built. TileLang's passes themselves (``BindTarget``, ``Simplify``, ...)
are not here: tile's are ``tile.ir.transform``.

Example::

    >>> from tile.lang.transform import PassConfigKey, simplify_prim_func
    >>> PassConfigKey.TL_DISABLE_TMA_LOWER.value
    'tl.disable_tma_lower'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._src.pass_config import PassConfigKey

__all__ = ["PassConfigKey", "simplify_prim_func"]


def simplify_prim_func(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``'s kernels as built: tile's compiler simplifies each kernel it compiles."""
    return func
