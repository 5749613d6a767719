"""Errors the CUDA backend raises; all are ``TileError`` subclasses."""

from __future__ import annotations

from tile.layout.errors import TileError


class CudaArchError(TileError):
    """A CUDA architecture spec that tile cannot use."""


class ArchSpecError(CudaArchError):
    """An architecture spec that is not spelled in any accepted form."""


class UnsupportedArchError(CudaArchError):
    """A well-formed architecture for which tile has no capability table."""


class ToolchainNotFoundError(TileError):
    """No usable ``nvcc`` was found."""


class ToolchainError(TileError):
    """``nvcc`` was found but did not behave as expected (crashed, odd output)."""


class CudaLaunchError(TileError):
    """A compiled CUDA kernel could not be launched (bad arguments, driver failure)."""


class CudaDeviceUnavailableError(CudaLaunchError):
    """No CUDA driver or device here: the kernel compiles but cannot run."""
