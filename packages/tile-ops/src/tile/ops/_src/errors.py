"""The error tile.ops raises for arguments a caller can get wrong (before any compile)."""

from __future__ import annotations

import inspect
import os

from tile.ir.errors import SourceLocation, TileError


class OpArgumentError(TileError, ValueError):
    """An op was called with an argument it does not support: a shape, layout, dtype or
    device. The message names the argument; the hint says what the op takes.

    It is also a ``ValueError``, so code that caught the plain ``ValueError`` tile.ops
    raised before keeps working.
    """


def _library_roots() -> tuple[str, ...]:
    import tile

    roots = [os.path.join(os.path.abspath(p), "") for p in tile.__path__]
    try:
        import torch

        roots.append(os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), ""))
    except ImportError:
        pass
    return tuple(roots)


def _caller() -> SourceLocation | None:
    """The innermost frame outside tile and torch: the line of the user's call."""
    roots = _library_roots()
    frame = inspect.currentframe()
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(roots) and not filename.startswith("<"):
            return SourceLocation.from_file(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def bad_argument(op: str, argument: str, problem: str, hint: str) -> OpArgumentError:
    """``OpArgumentError("rms_norm: weight ...")`` located at the user's call."""
    return OpArgumentError(f"{op}: argument {argument!r} {problem}", hint=hint, location=_caller())
