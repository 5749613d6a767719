"""Where user code called into tile: the location for errors about a call (not a kernel line)."""

from __future__ import annotations

import inspect
import os

from tile.ir.errors import SourceLocation


def _tile_roots() -> tuple[str, ...]:
    import tile

    return tuple(os.path.join(os.path.abspath(p), "") for p in tile.__path__)


def call_site(also_outside: tuple[str, ...] = ()) -> SourceLocation | None:
    """The innermost stack frame outside the ``tile`` packages (the user's call line).

    ``also_outside`` names more folders whose frames are not the user's (a library the
    call went through, such as torch's).
    """
    roots = _tile_roots() + tuple(os.path.join(os.path.abspath(p), "") for p in also_outside)
    frame = inspect.currentframe()
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(roots) and not filename.startswith("<"):
            return SourceLocation.from_file(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None
