"""Loading the emulator's runtime and kernel libraries and launching a grid."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from typing import Any

from tile.ir.errors import SourceLocation

from .. import env
from . import _toolchain
from ._device import EmulatedDevice, resolve_device
from .errors import (
    SimtDeadlockError,
    SimtDivergenceError,
    SimtFault,
    SimtLaunchError,
    SimtMisuseError,
    SimtRaceError,
)

ABI_VERSION = 1
_FAULTS: dict[int, type[SimtFault]] = {
    1: SimtDeadlockError,
    2: SimtDivergenceError,
    3: SimtMisuseError,
    4: SimtLaunchError,
    5: SimtRaceError,
}
_PC = re.compile(r" \[pc (\S+)\+0x([0-9a-f]+)\]")
_SITE = re.compile(r", in the kernel at (.+):(\d+)$")
"""The runtime's suffix naming the faulting thread's kernel line (checked kernels)."""


class _LaunchDesc(ctypes.Structure):
    _fields_ = [
        ("entry", ctypes.c_void_p),
        ("block_begin", ctypes.c_void_p),
        ("args", ctypes.POINTER(ctypes.c_void_p)),
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("dyn_smem_bytes", ctypes.c_ulonglong),
        ("warp_size", ctypes.c_uint),
        ("workers", ctypes.c_uint),
        ("stack_bytes", ctypes.c_ulonglong),
        ("seed", ctypes.c_ulonglong),
    ]


_LIBC = ctypes.CDLL(None)
_runtime_lock = threading.Lock()
_runtime: ctypes.CDLL | None = None


def runtime() -> ctypes.CDLL:
    """The runtime library, built if needed and loaded once (RTLD_GLOBAL: kernels link to it)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            lib = ctypes.CDLL(str(_toolchain.runtime_library()), mode=ctypes.RTLD_GLOBAL)
            lib.tile_simt_launch.argtypes = [ctypes.POINTER(_LaunchDesc), ctypes.c_char_p, ctypes.c_ulong]
            lib.tile_simt_launch.restype = ctypes.c_int
            lib.tile_simt_check_tensors.argtypes = [
                ctypes.POINTER(ctypes.c_ulonglong),
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_uint,
            ]
            lib.tile_simt_check_tensors.restype = None
            if lib.tile_simt_abi_version() != ABI_VERSION:
                raise SimtLaunchError("the emulator runtime library has another ABI than this package")
            _runtime = lib
        return _runtime


_device_libraries: dict[pathlib.Path, ctypes.CDLL] = {}


def load_device(device: EmulatedDevice | str) -> EmulatedDevice:
    """Load the runtime and a device's native library (once; RTLD_GLOBAL: its kernels call into it)."""
    device = resolve_device(device)
    runtime()
    path = _toolchain.device_library(device)
    if path is not None:
        with _runtime_lock:
            if path not in _device_libraries:
                _device_libraries[path] = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    return device


def _kernel_line(match: re.Match[str]) -> str:
    """`` [pc lib+0xoff]`` of a checked kernel's fault as ``(line N)`` of its source (addr2line)."""
    tool = shutil.which("addr2line")
    if tool is None:
        return match.group(0)
    try:
        found = subprocess.run(
            [tool, "-i", "-e", match.group(1), "0x" + match.group(2)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.split()
    except OSError:
        return match.group(0)
    for place in found:  # innermost first: the first frame in the kernel's own source
        name, _, line = place.rpartition(":")
        if name.endswith("kernel.cu") and line.split(" ")[0].isdigit():
            return f" (line {line.split(' ')[0]})"
    return match.group(0)


def default_workers() -> int:
    """OS threads that run blocks: ``TILE_CPU_NUM_THREADS``, else the cores this process may use."""
    configured = env.NUM_THREADS.get()
    if configured > 0:
        return configured
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class SimtKernel:
    """A kernel library built by ``kernel_library``: launch it over a grid of blocks.

    ``device`` is the one the library was built for (its native library is loaded first);
    ``warp_size`` defaults to the device's (32 without a device). Arguments are ctypes
    values (``c_void_p`` for a tensor's data pointer, ``c_int32``... for scalars) in the
    kernel's parameter order.

    Example::

        lib = kernel_library(cuda_source, "main_kernel", "cuda")
        SimtKernel(lib, device="cuda").launch((4, 1, 1), (128, 1, 1), 0, [ctypes.c_void_p(ptr)])
    """

    def __init__(
        self,
        library: pathlib.Path,
        warp_size: int | None = None,
        device: EmulatedDevice | str | None = None,
    ) -> None:
        runtime()
        resolved = load_device(device) if device is not None else None
        self.library_path = library
        self.device = resolved
        self.warp_size = warp_size or (resolved.warp_size if resolved else 32)
        try:
            self._lib = ctypes.CDLL(str(library))
        except OSError as exc:  # e.g. an undefined symbol of a device library that is not loaded
            raise SimtLaunchError(
                f"cannot load the emulated kernel {library.name}: {exc}",
                hint="pass the device it was built for (SimtKernel(library, device=...)) so that "
                "its native library is loaded first",
            ) from exc
        if self._lib.tile_simt_kernel_abi() != ABI_VERSION:
            raise SimtLaunchError(f"{library.name} was built for another emulator ABI")
        self._entry = ctypes.cast(self._lib.tile_simt_kernel_entry, ctypes.c_void_p).value
        self._block_begin = ctypes.cast(self._lib.tile_simt_kernel_block_begin, ctypes.c_void_p).value

    def launch(
        self,
        grid: Sequence[int],
        block: Sequence[int],
        dynamic_shared: int,
        args: Sequence[Any],
        *,
        workers: int | None = None,
        stack_bytes: int = 0,
        seed: int | None = None,
        tensors: Sequence[tuple[str, int, int]] = (),
    ) -> None:
        """Run the kernel; raises a ``SimtFault`` subclass if a block faulted or deadlocked.

        ``seed`` (default ``TILE_EMU_SEED``): nonzero shuffles thread order within each epoch.
        ``tensors``: ``(name, address, bytes)`` of the global tensors; a kernel built with access
        checks reports a load or store just outside one of them.
        """
        if dynamic_shared > _toolchain.DYNAMIC_SHARED_CAPACITY:
            raise SimtLaunchError(
                f"the kernel asks for {dynamic_shared} bytes of dynamic shared memory; "
                f"the emulator has {_toolchain.DYNAMIC_SHARED_CAPACITY}",
                hint="use smaller tiles or fewer pipeline stages",
            )
        pointers = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
        desc = _LaunchDesc()
        desc.entry = self._entry
        desc.block_begin = self._block_begin
        desc.args = ctypes.cast(pointers, ctypes.POINTER(ctypes.c_void_p))
        desc.grid[:] = [int(g) for g in grid]
        desc.block[:] = [int(b) for b in block]
        desc.dyn_smem_bytes = int(dynamic_shared)
        desc.warp_size = self.warp_size
        desc.workers = workers if workers is not None else default_workers()
        desc.stack_bytes = stack_bytes
        desc.seed = env.EMU_SEED.get() if seed is None else seed
        error = ctypes.create_string_buffer(4096)
        lib = runtime()
        ranges = (ctypes.c_ulonglong * max(2 * len(tensors), 1))(*[v for _, a, n in tensors for v in (a, n)])
        names = (ctypes.c_char_p * max(len(tensors), 1))(*[name.encode() for name, _, _ in tensors])
        lib.tile_simt_check_tensors(ranges, names, len(tensors))
        status = lib.tile_simt_launch(ctypes.byref(desc), error, len(error))
        _LIBC.fflush(None)  # the kernel's printf (T.print) lines before anything Python prints next
        if status != 0:
            fault = _FAULTS.get(status, SimtFault)
            message = _PC.sub(_kernel_line, error.value.decode(errors="replace"))
            site = _SITE.search(message)
            location = None
            if site is not None:  # a checked kernel: the user's line is the error's location
                message = message[: site.start()]
                location = SourceLocation.from_file(site.group(1), int(site.group(2)))
                text = location.source_line or ""
                location = dataclasses.replace(location, column=len(text) - len(text.lstrip()))
            raise fault(
                f"emulated kernel fault: {message}",
                hint="(line N) numbers refer to the kernel's generated source (kernel.get_kernel_source())"
                + ("" if location else "; rerun with TILE_CHECK=1 to have faults name your kernel's line"),
                location=location,
            )
