"""Errors of the tile language front end (all ``TileError`` subclasses)."""

from __future__ import annotations

from tile.ir.errors import TileError, TileShapeError, TileTypeError, TileWarning

from ._src.callsite import call_site as call_site

__all__ = [
    "ArgumentAssertionError",
    "ArgumentIndexError",
    "ArgumentTypeError",
    "ArgumentValueError",
    "ImportSourceError",
    "KernelArgumentError",
    "KernelAssertionError",
    "KernelAssumptionError",
    "TileParseError",
    "TileScopeError",
    "TileShapeError",
    "TileTypeError",
    "TileWarning",
    "UnknownKeywordError",
    "UnknownNameError",
    "call_site",
]


class TileParseError(TileError):
    """The kernel's Python source is not a valid tile program."""


class TileScopeError(TileError):
    """A construct was used where it has no meaning (``alloc_fragment`` outside ``T.Kernel``, ...)."""


class KernelArgumentError(TileTypeError):
    """A compiled kernel was called with arguments of the wrong number, shape, dtype or layout."""


class KernelAssumptionError(KernelArgumentError, RuntimeError):
    """A call's tensor sizes or scalar arguments break a ``T.assume`` of the kernel that the host
    can check (it reads only symbolic dims and scalar parameters); located at the ``T.assume``
    line. Also a ``RuntimeError``, as TileLang raises for it."""


class KernelAssertionError(TileError):
    """A ``T.device_assert`` failed while the kernel ran; located at the assert's line."""


class KernelBoundsError(KernelAssertionError):
    """Under ``TILE_CHECK=1``, a load or store left its tensor's bounds; names the tensor, index,
    block and the kernel line of the access."""


class ImportSourceError(TileError):
    """``T.import_source`` could not compile its C source (no compiler, or a compile error)."""


class UnknownNameError(TileParseError, AttributeError):
    """A ``T.<name>`` that the language does not have (also an ``AttributeError``, so
    ``hasattr(T, name)`` keeps working); the hint suggests the closest public names."""


class UnknownKeywordError(TileTypeError, TypeError):
    """A keyword argument that a ``T.*`` call, ``compile`` or ``jit`` does not take (also a
    ``TypeError``, as Python raises for a bad keyword); the hint suggests the closest ones."""


class ArgumentTypeError(TileTypeError, TypeError):
    """A ``T.*`` call got an argument of the wrong kind (a Python int where an expression is
    needed, a float predicate, ...); also a ``TypeError``, as TileLang raises for it."""


class ArgumentValueError(TileTypeError, ValueError):
    """A ``T.*`` call got an argument of the right kind but a value it does not accept (an
    unknown rounding mode, a scalar where a vector is needed); also a ``ValueError``."""


class ArgumentIndexError(TileTypeError, IndexError):
    """A constant index a ``T.*`` call takes is out of range (a vector lane, ...); also an
    ``IndexError``."""


class ArgumentAssertionError(TileTypeError, AssertionError):
    """A ``T.*`` call's arguments break a rule that TileLang checks with ``assert`` (a view or
    reshape that does not cover the same bytes, a bitwise reducer over floats); also an
    ``AssertionError``, so TileLang programs that expect one keep working."""
