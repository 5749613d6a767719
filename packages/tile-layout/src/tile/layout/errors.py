"""The error hierarchy shared by every tile package.

``TileError`` is the root of every error a user can cause. It lives here, in the
lowest package of the dependency tree, so that every tier (layout, ir, lang, ops,
backends) raises subclasses of one class. Each error carries an optional
``SourceLocation`` that names the kernel's source line, and a ``hint`` that says
how to fix the mistake; ``str(err)`` renders both with a caret under the column.

Example::

    >>> from tile.layout.errors import TileError, SourceLocation
    >>> loc = SourceLocation("kern.py", 12, 4, "    T.copy(A, B)")
    >>> print(TileError("extents differ", hint="copy equal shapes", location=loc))
    extents differ
      --> kern.py:12:5
       |
    12 |     T.copy(A, B)
       |     ^
    hint: copy equal shapes
"""

from __future__ import annotations

import dataclasses
import difflib
import linecache
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class SourceLocation:
    """A position in a user's source file: 1-based line, 0-based column."""

    filename: str
    line: int
    column: int = 0
    source_line: str | None = None

    @classmethod
    def from_file(cls, filename: str, line: int, column: int = 0) -> SourceLocation:
        """Build a location and read the source line from ``filename`` when it exists."""
        text = linecache.getline(filename, line).rstrip("\n")
        return cls(filename, line, column, text or None)

    def render(self) -> str:
        """Render as ``--> file:line:col`` plus the source line with a caret."""
        head = f"  --> {self.filename}:{self.line}:{self.column + 1}"
        if not self.source_line:
            return head
        gutter = " " * len(str(self.line))
        return "\n".join(
            [
                head,
                f"{gutter} |",
                f"{self.line} | {self.source_line}",
                f"{gutter} | {' ' * self.column}^",
            ]
        )


class TileError(Exception):
    """Root of every user-facing error raised by tile.

    Args:
        message: what went wrong, in one sentence.
        hint: how to fix it.
        location: where in the user's kernel source it went wrong.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        location: SourceLocation | None = None,
    ) -> None:
        self.message = message
        self.hint = hint
        self.location = location
        super().__init__(message)

    def with_location(self, location: SourceLocation | None) -> TileError:
        """Attach a location if the error has none yet; returns ``self``."""
        if self.location is None and location is not None:
            self.location = location
        return self

    def __str__(self) -> str:
        parts = [self.message]
        if self.location is not None:
            parts.append(self.location.render())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


def did_you_mean(word: str, candidates: Iterable[str], prefix: str = "") -> str | None:
    """``"did you mean `X`?"`` for the candidates closest to a misspelled ``word``, or ``None``.

    Candidates are computed by the caller at error time (a module's public names, a
    signature's parameters), so names added later are suggested too.

    Example::

        >>> did_you_mean("Paralel", ["Parallel", "Pipelined"], prefix="T.")
        'did you mean `T.Parallel`?'
    """
    names = sorted({c for c in candidates if c != word})
    # Compared without case: `transpose_b` is closest to `transpose_B`, `t.parallel` to `T.Parallel`.
    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)
    close = [by_lower[c] for c in difflib.get_close_matches(word.lower(), list(by_lower), n=3, cutoff=0.6)]
    if not close:
        return None
    return "did you mean " + " or ".join(f"`{prefix}{c}`" for c in close) + "?"


class LayoutError(TileError):
    """A layout or fragment was built or combined in a way that has no meaning."""


class LayoutValueError(LayoutError, ValueError):
    """A layout method got a count or dim out of range (also a ``ValueError``, as in TileLang)."""


class LayoutTypeError(LayoutError, TypeError):
    """A layout method got an argument of the wrong kind (also a ``TypeError``, as in TileLang)."""


class EnvironmentVariableError(TileError):
    """An environment variable read by tile holds a value of the wrong form."""
