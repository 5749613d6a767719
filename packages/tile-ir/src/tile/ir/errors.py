"""Errors the compiler raises for mistakes a user can make.

Every class here is a ``tile.layout.errors.TileError``: it carries a message, a hint
saying how to fix the mistake, and (when known) the location in the user's kernel
source, rendered with a caret.

Example::

    >>> from tile.ir.errors import TileShapeError
    >>> str(TileShapeError("extents differ", hint="copy equal shapes"))
    'extents differ\\nhint: copy equal shapes'
"""

from __future__ import annotations

from typing import Any

from tile.layout.errors import SourceLocation, TileError

__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "LayoutInferenceError",
    "PassContractError",
    "PipelinePlanError",
    "ResourceLimitError",
    "SourceLocation",
    "TargetError",
    "TileError",
    "TileShapeError",
    "TileTypeError",
    "TileVerifyError",
    "TileWarning",
    "UnsupportedOnTargetError",
]


class TileWarning(UserWarning):
    """A kernel compiles, but one of its statements may not do what it seems to say (a
    ``T.copy`` between regions of different extents copies only one of them); issued at
    the kernel's line."""


class TileTypeError(TileError):
    """A value has the wrong dtype or kind (a buffer where a scalar was expected, ...)."""


class TileShapeError(TileError):
    """Shapes or extents do not agree (copy regions of different sizes, bad rank, ...)."""


class TargetError(TileError):
    """A target description cannot be parsed or names a kind no backend handles."""


class BackendError(TileError):
    """A backend failed while building or loading a kernel."""


class BackendUnavailableError(BackendError):
    """No installed backend can serve the requested target or device."""


class UnsupportedOnTargetError(TileError):
    """The kernel uses a feature that the chosen target does not implement."""


class ResourceLimitError(UnsupportedOnTargetError):
    """The kernel needs more of a resource (threads, shared memory) than the target has.

    ``fallback_target``, when a backend sets it, is a target the same kernel may fit
    (the CUDA backend's: without warp specialization); ``tile.lang.compile`` then
    builds for it once instead of failing.
    """

    fallback_target: Any = None


class TileVerifyError(TileError):
    """The IR broke an invariant that a pass relies on (found by ``tile.ir.transform.verify``)."""


class PassContractError(TileVerifyError):
    """A pass pipeline broke a pass contract: a pass ran without a property it needs, or its
    output lacks a property it guarantees (``tile.ir.transform.run_pipeline``).

    ``pass_name`` names the pass at fault (the one that needed or the one that guaranteed);
    ``property_name`` the property; the message says which of the two went wrong.
    """

    def __init__(
        self,
        message: str,
        *,
        pass_name: str,
        property_name: str | None = None,
        hint: str | None = None,
        location: SourceLocation | None = None,
    ) -> None:
        super().__init__(message, hint=hint, location=location)
        self.pass_name = pass_name
        self.property_name = property_name


class LayoutInferenceError(TileError):
    """No buffer layout satisfies the constraints of every tile operator using it."""


class PipelinePlanError(TileError):
    """A ``T.Pipelined`` stage/order assignment would break a dependence between statements."""


def location_from_span(span: object) -> SourceLocation | None:
    """Turn a TVM ``Span`` (1-based line and column) into a ``SourceLocation``.

    Returns ``None`` for a missing span or one without a file name.
    """
    if span is None:
        return None
    source_name = getattr(span, "source_name", None)
    filename = getattr(source_name, "name", None)
    line = getattr(span, "line", 0)
    if not filename or not isinstance(line, int) or line <= 0:
        return None
    column = max(int(getattr(span, "column", 1)) - 1, 0)
    return SourceLocation.from_file(str(filename), line, column)
