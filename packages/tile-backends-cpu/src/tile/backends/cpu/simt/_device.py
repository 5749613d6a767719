"""Emulated devices: what a GPU vendor package gives the emulator to run its kernels.

The emulator owns the vendor-neutral parts (the runtime ``tile_simt.h`` and the GPU C++
dialect ``tile_simt_dialect.h`` in its ``include/`` folder); each vendor ships the
emulation variant of its device header, and any native code its instructions need, and
registers them here under a name.
"""

from __future__ import annotations

import dataclasses
import pathlib
import threading

from .errors import SimtDeviceError


@dataclasses.dataclass(frozen=True)
class EmulatedDevice:
    """A vendor's GPU as the emulator runs it.

    Attributes:
        name: the registry name (``"cuda"``, ``"hip"``).
        header: the device header a kernel's source includes (``"tile_cuda.h"``); the
            emulator's wrapper includes it first.
        include_dirs: folders holding ``header`` and everything it includes (searched before
            the emulator's own ``include/``, so they shadow the vendor's real device header).
        warp_size: lanes per warp (32 for NVIDIA, 64 for AMD wave64).
        native_sources: C++ files built once into a device library (cached by content,
            linked against the runtime) that is loaded before the device's kernels: the
            compute functions of the vendor's warp collectives (``tile_simt_warp_call``).
        preamble: lines the wrapper puts before ``#include header`` (macros a header reads).

    Every ``.h`` under ``include_dirs`` and every native source is part of the cache key of
    each kernel built for the device.

    Example::

        from pathlib import Path
        from tile.backends.cpu.simt import EmulatedDevice, register_device
        HERE = Path(__file__).parent
        TOY = register_device(EmulatedDevice(
            name="toy", header="tile_toy.h", include_dirs=(HERE / "include",), warp_size=16,
            native_sources=(HERE / "native" / "toy_collectives.cpp",)))
    """

    name: str
    header: str
    include_dirs: tuple[pathlib.Path, ...]
    warp_size: int = 32
    native_sources: tuple[pathlib.Path, ...] = ()
    preamble: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise SimtDeviceError(
                f"an emulated device's name must be an identifier, not {self.name!r}",
                hint="name it like its backend's target kind, e.g. 'cuda' or 'hip'",
            )
        if self.warp_size not in (8, 16, 32, 64):
            raise SimtDeviceError(
                f"device {self.name}: warp size {self.warp_size} is not one the emulator runs",
                hint="use 8, 16, 32 or 64 lanes (collectives carry a 64-bit member mask)",
            )
        folders = tuple(pathlib.Path(p).resolve() for p in self.include_dirs)
        sources = tuple(pathlib.Path(p).resolve() for p in self.native_sources)
        object.__setattr__(self, "include_dirs", folders)
        object.__setattr__(self, "native_sources", sources)
        if not any((folder / self.header).is_file() for folder in folders):
            raise SimtDeviceError(
                f"device {self.name}: its header {self.header} is in none of its include folders "
                f"({', '.join(map(str, folders)) or 'none given'})",
                hint="list the folder that holds the header in include_dirs",
            )
        for source in sources:
            if not source.is_file():
                raise SimtDeviceError(
                    f"device {self.name}: the native source {source} does not exist",
                    hint="ship it as package data beside the device header",
                )

    def headers(self) -> list[tuple[str, bytes]]:
        """``(folder-relative name, bytes)`` of every ``.h`` under the include folders, sorted."""
        found: list[tuple[str, bytes]] = []
        for index, folder in enumerate(self.include_dirs):
            found += [(f"{index}/{p.relative_to(folder)}", p.read_bytes()) for p in folder.rglob("*.h")]
        return sorted(found)


_lock = threading.Lock()
_devices: dict[str, EmulatedDevice] = {}


def register_device(device: EmulatedDevice) -> EmulatedDevice:
    """Make ``device`` known to the emulator under ``device.name``; returns it.

    Registering an equal device again is harmless (modules that register on import may be
    imported twice); another device under a taken name is an error.

    Raises:
        SimtDeviceError: a different device already has this name.
    """
    with _lock:
        known = _devices.get(device.name)
        if known is not None and known != device:
            raise SimtDeviceError(
                f"another emulated device is already registered as {device.name!r}",
                hint="give the new device its own name",
            )
        _devices[device.name] = device
    return device


def registered_devices() -> tuple[EmulatedDevice, ...]:
    """Every registered device, in registration order."""
    with _lock:
        return tuple(_devices.values())


def resolve_device(device: EmulatedDevice | str) -> EmulatedDevice:
    """``device`` itself, or the registered device of that name.

    Raises:
        SimtDeviceError: no device has that name.
    """
    if isinstance(device, EmulatedDevice):
        return device
    with _lock:
        found = _devices.get(device)
        names = sorted(_devices)
    if found is None:
        raise SimtDeviceError(
            f"no emulated device is registered as {device!r} (registered: {', '.join(names) or 'none'})",
            hint="import the vendor backend's emulated device first (e.g. tile.backends.cuda.emu), "
            "or pass its EmulatedDevice itself",
        )
    return found
