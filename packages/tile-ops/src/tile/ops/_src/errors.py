"""The error tile.ops raises for arguments a caller can get wrong (before any compile)."""

from __future__ import annotations

import os

from tile.ir.errors import SourceLocation, TileError
from tile.lang.errors import call_site


class OpArgumentError(TileError, ValueError):
    """An op was called with an argument it does not support: a shape, layout, dtype or
    device. The message names the argument; the hint says what the op takes.

    It is also a ``ValueError``, so code that caught the plain ``ValueError`` tile.ops
    raised before keeps working.
    """


def _caller() -> SourceLocation | None:
    """The innermost frame outside tile and torch: the line of the user's call."""
    try:
        import torch
    except ImportError:
        return call_site()
    return call_site((os.path.dirname(os.path.abspath(torch.__file__)),))


def bad_argument(op: str, argument: str, problem: str, hint: str) -> OpArgumentError:
    """``OpArgumentError("rms_norm: weight ...")`` located at the user's call."""
    return OpArgumentError(f"{op}: argument {argument!r} {problem}", hint=hint, location=_caller())
