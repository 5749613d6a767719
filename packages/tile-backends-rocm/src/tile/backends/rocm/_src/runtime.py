"""Launching a compiled code object on torch ROCm tensors through the HIP runtime (ctypes).

``libamdhip64.so`` is opened on the first launch only, never when the manifest loads, and
its prototypes are set once. Every argument is checked first (a torch tensor on the GPU,
one device, dtype, shape, row-major strides), once per argument signature: plans, packing
and the typed errors are :class:`tile.ir.gpu.launcher.GpuLauncher`'s, shared with CUDA.
Without the HIP runtime or a device a launch raises ``RocmDeviceUnavailableError``. torch's
ROCm build names its devices ``cuda``; the kernel runs on ``torch.cuda.current_stream()``
of its tensors' device (a ``hipStream_t``).

The module is loaded with ``hipModuleLoadData`` and launched with
``hipModuleLaunchKernel`` (kernel parameters passed as an array of pointers to values,
as the HIP module API takes them).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

from tile.ir.errors import SourceLocation
from tile.ir.gpu import LaunchRecipe, ParamSpecs, ParamStrides
from tile.ir.gpu.launcher import (
    DeviceFunction,
    GpuDriver,
    GpuLauncher,
    ScopedFunction,
    set_prototypes,
)

from ..errors import RocmDeviceUnavailableError, RocmLaunchError

_LIBRARIES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")
_hip: Any = None
_lock = threading.Lock()

Fail = Callable[[str, str], Exception]


def _runtime() -> Any:
    """The HIP runtime library (``libamdhip64``), opened once, its prototypes set."""
    global _hip
    with _lock:
        if _hip is None:
            errors = []
            for name in _LIBRARIES:
                try:
                    _hip = _prototypes(ctypes.CDLL(name))
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


_P, _U, _I = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
_PP, _PI = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)
PROTOTYPES: dict[str, list[Any]] = {
    "hipGetDeviceCount": [_PI],
    "hipGetDevice": [_PI],
    "hipSetDevice": [_I],
    "hipModuleLoadData": [_PP, _P],
    "hipModuleGetFunction": [_PP, _P, ctypes.c_char_p],
    "hipModuleLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P],
}
"""The ctypes argument types (hip_runtime_api.h) of the calls the launcher makes; each returns
a ``hipError_t``. Checked against the installed header by the tests."""


def _prototypes(lib: Any) -> Any:
    set_prototypes(lib, PROTOTYPES)
    lib.hipGetErrorString.argtypes = [ctypes.c_int]
    lib.hipGetErrorString.restype = ctypes.c_char_p
    return lib


def hip_probe() -> bool:
    """Whether the HIP runtime and at least one ROCm device are here. Never raises."""
    try:
        lib = _runtime()
        count = ctypes.c_int(0)
        return bool(lib.hipGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0)
    except Exception:
        return False


class HipFunction(ScopedFunction):
    """A kernel loaded on one device, launched with that device current."""

    symbols = ("hipGetDevice", "hipSetDevice", "hipModuleLaunchKernel")
    scope_type = ctypes.c_int

    def __init__(self, lib: Any, device: int, module: int, function: int, image: Any) -> None:
        super().__init__(lib, device, function)
        self.module = module
        self.image = image  # the code object's bytes, kept alive as long as the module


class HipDriver(GpuDriver):
    """The HIP module API through ctypes."""

    vendor = "ROCm"

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def error_text(self, status: int) -> str:
        text = self.lib.hipGetErrorString(status)
        return text.decode() if text else f"hipError_t {status}"

    def check(self, status: int, what: str, fail: Fail) -> None:
        if status != 0:
            raise fail(
                f"{what} failed: {self.error_text(status)}",
                "check the ROCm install and that the device's gfx target matches the kernel's",
            )

    def load(self, image: bytes, kernel_name: str, device: int, **options: Any) -> DeviceFunction:
        fail: Fail = options["fail"]
        lib = self.lib
        previous = ctypes.c_int()
        lib.hipGetDevice(ctypes.byref(previous))
        self.check(lib.hipSetDevice(device), "hipSetDevice", fail)
        try:
            module, function = ctypes.c_void_p(), ctypes.c_void_p()
            buffer = ctypes.create_string_buffer(image, len(image))
            self.check(lib.hipModuleLoadData(ctypes.byref(module), buffer), "hipModuleLoadData", fail)
            found = lib.hipModuleGetFunction(ctypes.byref(function), module, kernel_name.encode())
            self.check(found, "hipModuleGetFunction", fail)
        finally:
            lib.hipSetDevice(previous.value)
        return HipFunction(lib, device, int(module.value or 0), int(function.value or 0), buffer)


class HipKernel(GpuLauncher):
    """A code object plus its launch recipe; call it with every kernel parameter in order.

    ``driver`` replaces the HIP runtime (a ``tile.ir.gpu.testing.RecordingDriver`` in
    host-side tests).
    """

    launch_error = RocmLaunchError
    vendor = "ROCm"
    tensor_hint = (
        "pass a torch tensor on the GPU (torch's ROCm build: device='cuda'), "
        "or set TILE_DEVICE=emu to run on the CPU emulator"
    )
    scalars_must_be_numbers = True

    def __init__(
        self,
        code_object: bytes,
        recipe: LaunchRecipe,
        params: ParamSpecs,
        location: SourceLocation | None = None,
        driver: GpuDriver | None = None,
        strides: ParamStrides | None = None,
    ) -> None:
        super().__init__(recipe, params, location, driver, strides)
        self.code_object = code_object

    def open_driver(self) -> GpuDriver:
        lib = _runtime()
        if not hip_probe():
            raise RocmDeviceUnavailableError(
                f"no ROCm device is present to run {self.recipe.kernel_name}",
                hint="run on a machine with an AMD GPU, or set TILE_DEVICE=emu to run on the CPU emulator",
                location=self.location,
            )
        return HipDriver(lib)

    def load_function(self, driver: GpuDriver, device: int) -> DeviceFunction:
        return driver.load(
            self.code_object, self.recipe.kernel_name, device, fail=self._fail,
            param_count=len(self.recipe.params),
        )  # fmt: skip
