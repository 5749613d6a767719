"""The names TileLang programs import from ``tilelang.transform``.

``PassConfigKey`` is tile's (``tile.lang.PassConfigKey``: every TileLang key, honoured or
accepted as ``tile.lang._src.pass_config`` says). ``simplify_prim_func`` decorates a
function that builds a kernel, and ``simplify.apply_simplify`` takes a kernel: both drop the
tensor parameters the kernel never uses, as TileLang's do (tile simplifies the body of
every kernel when it compiles it). TileLang's passes themselves (``BindTarget``,
``Simplify``, ...) are not here: tile's are ``tile.ir.transform``.

Example::

    >>> from tile.lang.transform import PassConfigKey, simplify_prim_func
    >>> PassConfigKey.TL_DISABLE_TMA_LOWER.value
    'tl.disable_tma_lower'
"""

from __future__ import annotations

from .._src.pass_config import PassConfigKey
from . import simplify as simplify
from .simplify import simplify_prim_func

__all__ = ["PassConfigKey", "simplify", "simplify_prim_func"]
