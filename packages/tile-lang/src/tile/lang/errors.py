"""Errors of the tile language front end (all ``TileError`` subclasses)."""

from __future__ import annotations

from tile.ir.errors import TileError, TileShapeError, TileTypeError

__all__ = [
    "ImportSourceError",
    "KernelArgumentError",
    "KernelAssertionError",
    "TileParseError",
    "TileScopeError",
    "TileShapeError",
    "TileTypeError",
]


class TileParseError(TileError):
    """The kernel's Python source is not a valid tile program."""


class TileScopeError(TileError):
    """A construct was used where it has no meaning (``alloc_fragment`` outside ``T.Kernel``, ...)."""


class KernelArgumentError(TileTypeError):
    """A compiled kernel was called with arguments of the wrong number, shape, dtype or layout."""


class KernelAssertionError(TileError):
    """A ``T.device_assert`` failed while the kernel ran; located at the assert's line."""


class KernelBoundsError(KernelAssertionError):
    """Under ``TILE_CHECK=1``, a load or store left its tensor's bounds; names the tensor, index,
    block and the kernel line of the access."""


class ImportSourceError(TileError):
    """``T.import_source`` could not compile its C source (no compiler, or a compile error)."""
