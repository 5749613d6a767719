"""Errors of the SIMT emulator; all are ``TileError`` subclasses (through ``BackendError``)."""

from __future__ import annotations

from tile.ir.errors import BackendError

from ..toolchain import HostCompilerNotFoundError as HostCompilerNotFoundError


class SimtDeviceError(BackendError):
    """An emulated device is ill-formed, or a name was registered twice or never."""


class SimtCompileError(BackendError):
    """The host C++ compiler rejected an emulated kernel or the emulator's runtime."""


class SimtFault(BackendError):
    """An emulated kernel broke a GPU rule at run time; the message names the block, threads and line."""


class SimtDeadlockError(SimtFault):
    """Threads wait on a barrier or warp collective that can never complete."""


class SimtDivergenceError(SimtFault):
    """Threads that must meet (a barrier, a warp collective) reached different ones."""


class SimtMisuseError(SimtFault):
    """An instruction's contract was broken (alignment, member mask, sizes)."""


class SimtLaunchError(SimtFault):
    """The launch cannot run (block too large, no memory for fiber stacks, shared memory too large)."""


class SimtRaceError(SimtFault):
    """A thread read shared memory that another thread wrote with no synchronisation in between."""
