"""Tracebacks of user mistakes without the compiler's own frames.

A ``TileError`` already names the kernel line and says how to fix it; the fifty
frames of the parser, the passes and TVM between the user's call and the ``raise``
only bury it. Public entry points (``@T.prim_func``, ``compile``, ``jit``, a kernel
call) are wrapped in ``api_boundary``: a ``TileError`` leaving them keeps the user's
frames and loses the frames of ``tile``, ``tvm``, ``tvm_ffi`` and the standard
library calls made from them. ``TILE_TRACEBACK=full`` keeps every frame.
Other exceptions (bugs of the compiler itself) always keep their full traceback.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import types
from collections.abc import Callable
from typing import Any, TypeVar

from tile.ir.errors import TileError

from .. import env

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def _internal_roots() -> tuple[str, ...]:
    import tvm  # type: ignore[import-untyped]
    import tvm_ffi  # type: ignore[import-untyped]

    import tile

    paths = [*tile.__path__, *tvm.__path__, *tvm_ffi.__path__]
    return tuple(os.path.join(os.path.abspath(p), "") for p in paths)


@functools.cache
def _stdlib_roots() -> tuple[str, ...]:
    names = ("stdlib", "platstdlib")
    return tuple(os.path.join(os.path.abspath(sysconfig.get_path(n)), "") for n in names)


def _is_internal(filename: str) -> bool:
    # "<ast>" is TVMScript's eval of one kernel expression; the kernel line is in the error.
    return filename == "<ast>" or os.path.abspath(filename).startswith(_internal_roots())


def hide_internal_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without tile/TVM frames (and standard-library frames they called)."""
    kept: list[types.TracebackType] = []
    called_by_internal = False
    node = tb
    while node is not None:
        filename = node.tb_frame.f_code.co_filename
        if _is_internal(filename):
            called_by_internal = True
        elif called_by_internal and os.path.abspath(filename).startswith(_stdlib_roots()):
            pass  # contextlib, functools, ... inside the compiler
        else:
            called_by_internal = False
            kept.append(node)
        node = node.tb_next
    result: types.TracebackType | None = None
    for entry in reversed(kept):
        result = types.TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result


def _trim_chain(error: BaseException) -> None:
    """Hide internal frames of ``error`` and of the exceptions it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = hide_internal_frames(current.__traceback__)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def user_facing(error: TileError) -> TileError:
    """``error`` with internal frames hidden (unless ``TILE_TRACEBACK=full``), ready to re-raise."""
    if env.TRACEBACK.get() != "full":
        _trim_chain(error)
    return error


def api_boundary(fn: F) -> F:
    """Wrap a public entry point: a ``TileError`` leaving it shows only the user's frames."""

    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TileError as error:
            raise user_facing(error) from error.__cause__  # frames hidden; TILE_TRACEBACK=full shows all

    return boundary  # type: ignore[return-value]
