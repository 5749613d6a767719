"""Errors the ROCm backend raises; all are ``TileError`` subclasses."""

from __future__ import annotations

from tile.layout.errors import TileError


class RocmArchError(TileError):
    """An AMD GPU architecture spec that tile cannot use."""


class ArchSpecError(RocmArchError):
    """An architecture spec that is not spelled in any accepted form."""


class UnsupportedArchError(RocmArchError):
    """A well-formed gfx target for which tile has no capability table."""


class ToolchainNotFoundError(TileError):
    """No usable ``hipcc`` / ``amdclang++`` was found."""


class DeviceLibrariesMissingError(ToolchainNotFoundError):
    """The kernel needs ROCm's device libraries (``__ocml_*``, ``__ockl_*``) and the only compiler
    here that builds its arch has none (a plain clang++ with lld)."""


class ToolchainError(TileError):
    """A ROCm tool was found but did not behave as expected (crashed, odd output)."""


class RocmLaunchError(TileError):
    """A compiled HIP kernel could not be launched (bad arguments, HIP runtime failure)."""


class RocmDeviceUnavailableError(RocmLaunchError):
    """No HIP runtime or ROCm device here: the kernel compiles but cannot run."""
