"""Post-process the CUDA or HIP source tile generates, before it is compiled (TileLang's
``register_cuda_postproc_callback`` / ``register_hip_postproc_callback``).

The callback gets ``(code, target)``, the generated source and the ``tile.ir.target.Target``
it is for, and returns the source to compile; under ``TILE_DEVICE=emu`` the emulator runs
that source too. ``kernel.get_kernel_source()`` shows it. One callback per language: a new
one replaces the old (with ``override=False`` registering a second is an error). The kernel
cache keys kernels on the callback's code, so changing the callback recompiles; what it
captures (closure values, globals it reads) is not part of the key: disable the cache
(``tilelang.disable_cache()``) while such state changes.

Example::

    from tile.lang.engine.callback import register_cuda_postproc_callback

    @register_cuda_postproc_callback
    def stamp(code, target):
        return "// built by tile\\n" + code
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tile.ir.errors import TileError
from tile.ir.gpu.source_hooks import set_source_hook, source_hook

from .._src.callsite import call_site

__all__ = ["register_cuda_postproc_callback", "register_hip_postproc_callback"]

Callback = Callable[[str, Any], str]


class CallbackError(TileError, ValueError):
    """A post-processing callback that cannot be registered."""


def _register(language: str, api: str, func: Any, override: bool) -> Any:
    def register(callback: Callback) -> Callback:
        if not callable(callback):
            raise CallbackError(
                f"{api} takes a function (code, target) -> code, got {type(callback).__name__}",
                hint=f"decorate the function with @{api}, or call {api}(function)",
                location=call_site(),
            )
        if not override and source_hook(language) is not None:
            raise CallbackError(
                f"a {language} post-processing callback is already registered",
                hint=f"pass override=True to replace it: @{api}(override=True)",
                location=call_site(),
            )
        set_source_hook(language, callback)
        return callback

    if func is None or isinstance(func, bool):  # @register(...) or @register(True): a decorator
        override = override if func is None else func
        return register
    return register(func)


def register_cuda_postproc_callback(func: Any = None, override: bool = True) -> Any:
    """Register ``func(code, target) -> code`` to post-process every CUDA source generated from
    now on; as ``@register_cuda_postproc_callback``, or with ``(override=False)``."""
    return _register("cuda", "register_cuda_postproc_callback", func, override)


def register_hip_postproc_callback(func: Any = None, override: bool = True) -> Any:
    """Register ``func(code, target) -> code`` to post-process every HIP source generated from
    now on (see ``register_cuda_postproc_callback``)."""
    return _register("hip", "register_hip_postproc_callback", func, override)
