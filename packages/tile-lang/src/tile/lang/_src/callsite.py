"""Where user code called into tile: the location for errors about a call (not a kernel line)."""

from __future__ import annotations

import inspect
import os

from tile.ir.errors import SourceLocation


def _tile_roots() -> tuple[str, ...]:
    import tile

    return tuple(os.path.join(os.path.abspath(p), "") for p in tile.__path__)


def call_site() -> SourceLocation | None:
    """The innermost stack frame outside the ``tile`` packages (the user's call line)."""
    roots = _tile_roots()
    frame = inspect.currentframe()
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(roots) and not filename.startswith("<"):
            return SourceLocation.from_file(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None
