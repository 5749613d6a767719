"""Launching a compiled code object on torch ROCm tensors through the HIP runtime (ctypes).

``libamdhip64.so`` is opened on the first launch only, never when the manifest loads.
Every argument is checked first (a torch tensor on the GPU, one device, dtype, shape,
row-major strides); without the HIP runtime or a device a launch raises
``RocmDeviceUnavailableError``. torch's ROCm build names its devices ``cuda``; the kernel
runs on ``torch.cuda.current_stream()`` (a ``hipStream_t``).

The module is loaded with ``hipModuleLoadData`` and launched with
``hipModuleLaunchKernel`` (kernel parameters passed as an array of pointers to values,
as the HIP module API takes them).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Sequence
from typing import Any

from tile.ir.errors import SourceLocation
from tile.ir.gpu import KernelLauncher, LaunchRecipe, check_torch_arguments, launch_dims, scalar_argument

from ..errors import RocmDeviceUnavailableError, RocmLaunchError

_LIBRARIES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")
_hip: Any = None


def _runtime() -> Any:
    """The HIP runtime library (``libamdhip64``), opened once."""
    global _hip
    if _hip is None:
        errors = []
        for name in _LIBRARIES:
            try:
                _hip = ctypes.CDLL(name)
                break
            except OSError as exc:
                errors.append(str(exc))
        else:
            raise RocmDeviceUnavailableError(
                "launching a HIP kernel needs the HIP runtime (libamdhip64.so), which is not installed",
                hint="install ROCm (or `apt-get install libamdhip64-5`); compiling works without it, "
                "and TILE_DEVICE=emu runs the kernel on the CPU emulator",
            )
    return _hip


def hip_probe() -> bool:
    """Whether the HIP runtime and at least one ROCm device are here. Never raises."""
    try:
        lib = _runtime()
        count = ctypes.c_int(0)
        return bool(lib.hipGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0)
    except Exception:
        return False


def _check(lib: Any, status: int, what: str) -> None:
    if status != 0:
        lib.hipGetErrorString.restype = ctypes.c_char_p
        text = lib.hipGetErrorString(status)
        raise RocmLaunchError(
            f"{what} failed: {text.decode() if text else status}",
            hint="check the ROCm install and that the device's gfx target matches the kernel's",
        )


class HipKernel(KernelLauncher):
    """A code object plus its launch recipe; call it with every kernel parameter in order."""

    device_type = "cuda"
    """torch's ROCm build calls its GPUs ``cuda`` devices."""
    launch_error = RocmLaunchError

    def __init__(
        self,
        code_object: bytes,
        recipe: LaunchRecipe,
        params: Sequence[tuple[str, str, tuple[int | str, ...] | None]],
        location: SourceLocation | None = None,
    ) -> None:
        super().__init__(recipe, params, location)
        self.code_object = code_object
        self._functions: dict[int, Any] = {}
        self._lock = threading.Lock()

    def check_arguments(self, args: Sequence[Any]) -> tuple[dict[str, int], int]:
        """Check every argument; returns the symbolic-dim/scalar values and the device index."""
        hint = (
            "pass a torch tensor on the GPU (torch's ROCm build: device='cuda'), "
            "or set TILE_DEVICE=emu to run on the CPU emulator"
        )
        return check_torch_arguments(
            self.params, args, self._fail, "ROCm", hint, scalars_must_be_numbers=True
        )

    def _function(self, lib: Any, device: int) -> Any:
        with self._lock:
            if device in self._functions:
                return self._functions[device]
            _check(lib, lib.hipSetDevice(device), "hipSetDevice")
            module = ctypes.c_void_p()
            image = ctypes.create_string_buffer(self.code_object, len(self.code_object))
            _check(lib, lib.hipModuleLoadData(ctypes.byref(module), image), "hipModuleLoadData")
            function = ctypes.c_void_p()
            name = self.recipe.kernel_name.encode()
            _check(
                lib, lib.hipModuleGetFunction(ctypes.byref(function), module, name), "hipModuleGetFunction"
            )
            self._functions[device] = (module, function, image)
            return self._functions[device]

    def __call__(self, *args: Any) -> None:
        lib = _runtime()
        if not hip_probe():
            raise RocmDeviceUnavailableError(
                f"no ROCm device is present to run {self.recipe.kernel_name}",
                hint="run on a machine with an AMD GPU, or set TILE_DEVICE=emu to run on the CPU emulator",
            )
        names, device = self.check_arguments(args)
        by_name = {name: value for (name, _, _), value in zip(self.params, args, strict=True)}
        holders: list[Any] = []
        for param in self.recipe.params:
            if param.kind == "tensor":
                holders.append(ctypes.c_void_p(int(by_name[param.source].data_ptr())))
            else:
                holders.append(scalar_argument(param, names, by_name, self._fail))
        grid, block, shared = launch_dims(self.recipe, names, self._fail)
        if min(grid) <= 0:
            return
        _, function, _ = self._function(lib, device)
        pointers = (ctypes.c_void_p * len(holders))(
            *[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders]
        )
        torch = sys.modules["torch"]
        stream = ctypes.c_void_p(int(torch.cuda.current_stream(device).cuda_stream))
        status = lib.hipModuleLaunchKernel(
            function,
            *(ctypes.c_uint(g) for g in grid),
            *(ctypes.c_uint(b) for b in block),
            ctypes.c_uint(shared),
            stream,
            pointers,
            None,
        )
        _check(lib, status, "hipModuleLaunchKernel")
