"""Launching a compiled cubin on torch CUDA tensors through the CUDA driver API.

The driver (``libcuda``) is called through ctypes with its prototypes set once, on the
first launch, never when the backend's manifest loads: the per-call path is one
``cuCtxGetCurrent`` and one ``cuLaunchKernel`` (:class:`CudaDriver`), and everything else
(argument plans, tensor maps, checks) is :class:`tile.ir.gpu.launcher.GpuLauncher`'s, shared
with ROCm. Every argument is checked (torch CUDA tensor, one device, dtype, shape, contiguous
strides) once per argument signature before anything reaches the driver; without a driver or a
device a launch raises ``CudaDeviceUnavailableError``. The kernel runs on
``torch.cuda.current_stream()`` of its tensors' device, in that device's primary context.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Any

from tile.ir.errors import SourceLocation
from tile.ir.gpu import KernelParam, LaunchRecipe, ParamSpecs, ParamStrides
from tile.ir.gpu.launcher import (
    DeviceFunction,
    GpuDriver,
    GpuLauncher,
    Packer,
    ScopedFunction,
    set_prototypes,
)

from ..errors import CudaDeviceUnavailableError, CudaLaunchError

STATIC_SHARED_LIMIT = 48 * 1024
"""A block's static plus dynamic shared memory above this needs
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (the limit counts both kinds)."""

DYNAMIC_SHARED_ALIGN = 1024
"""The largest alignment a kernel declares for its dynamic shared memory (the warp-specialized
kernels' ``extern __shared__ __align__(1024)``): the most padding between static and dynamic."""


def dynamic_shared_opt_in(static: int, dynamic: int) -> int | None:
    """The ``MAX_DYNAMIC_SHARED_SIZE_BYTES`` a launch with ``dynamic`` bytes needs; None: none.

    ``static`` is the function's own ``__shared__`` bytes (``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES``,
    e.g. a warp-specialized kernel's mbarriers). Without the opt-in a launch whose static plus
    dynamic shared memory exceeds 48 KiB fails with ``CUDA_ERROR_INVALID_VALUE``, so exactly
    48 KiB of dynamic memory beside a few static bytes already needs it.
    """
    if dynamic <= 0:
        return None
    padded = -(-static // DYNAMIC_SHARED_ALIGN) * DYNAMIC_SHARED_ALIGN
    return dynamic if padded + dynamic > STATIC_SHARED_LIMIT else None


_OTHER_ARCH_ERRORS = (200, 209)
"""CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NO_BINARY_FOR_GPU: the cubin is not for this device."""

SHARED_SIZE_BYTES = 1
"""``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`` (cuda.h): the function's static shared memory."""
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
"""``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (cuda.h)."""

_LIBRARY = "libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll"

Fail = Callable[[str, str], Exception]


def driver_probe() -> bool:
    """Whether a CUDA driver with at least one device is present. Never raises; cheap."""
    try:
        lib = ctypes.CDLL(_LIBRARY)
        if lib.cuInit(0) != 0:
            return False
        count = ctypes.c_int(0)
        return bool(lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0)
    except Exception:
        return False


_P, _U, _I = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
_PP, _PI = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)
PROTOTYPES: dict[str, list[Any]] = {
    "cuInit": [_U],
    "cuDeviceGet": [_PI, _I],
    "cuDevicePrimaryCtxRetain": [_PP, _I],
    "cuCtxGetCurrent": [_PP],
    "cuCtxSetCurrent": [_P],
    "cuModuleLoadData": [_PP, _P],
    "cuModuleGetFunction": [_PP, _P, ctypes.c_char_p],
    "cuFuncGetAttribute": [_PI, _I, _P],
    "cuFuncSetAttribute": [_P, _I, _I],
    "cuLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P],
    "cuGetErrorName": [_I, ctypes.POINTER(ctypes.c_char_p)],
}
"""The ctypes argument types (cuda.h) of the driver calls the launcher makes; each returns a
``CUresult``. Checked against the toolkit's cuda.h by the tests."""


def _prototypes(lib: Any) -> Any:
    return set_prototypes(lib, PROTOTYPES)


class CudaFunction(ScopedFunction):
    """A kernel loaded in the primary context of one device, launched in that context."""

    symbols = ("cuCtxGetCurrent", "cuCtxSetCurrent", "cuLaunchKernel")

    def __init__(self, lib: Any, context: int, function: int, static_shared: int, fail: Fail) -> None:
        super().__init__(lib, context, function)
        self.static_shared = static_shared
        self.fail = fail
        self._allowed = 0

    def set_dynamic_shared(self, nbytes: int) -> None:
        """Opt in to ``nbytes`` of dynamic shared memory when static plus dynamic exceed 48 KiB."""
        value = dynamic_shared_opt_in(self.static_shared, nbytes)
        if value is None or value <= self._allowed:
            return
        status = self.lib.cuFuncSetAttribute(self.function, MAX_DYNAMIC_SHARED_SIZE_BYTES, value)
        if status != 0:
            raise self.fail(
                f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={value}, "
                f"static {self.static_shared} bytes) failed with CUresult {status}",
                "the block needs more shared memory than the device has: use smaller tiles or fewer stages",
            )
        self._allowed = value


class CudaDriver(GpuDriver):
    """The CUDA driver API through ctypes (``libcuda``), prototypes set once per process."""

    vendor = "CUDA"

    def __init__(self, lib: Any) -> None:
        self.lib = _prototypes(lib)

    def check(self, status: int, what: str, fail: Fail) -> None:
        if status != 0:
            raise fail(f"{what} failed: {self.error_text(status)}", "check the device and the driver version")

    def error_text(self, status: int) -> str:
        name = ctypes.c_char_p()
        if self.lib.cuGetErrorName(status, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
        return f"CUresult {status}"

    def load(self, image: bytes, kernel_name: str, device: int, **options: Any) -> DeviceFunction:
        fail: Fail = options["fail"]
        lib = self.lib
        self.check(lib.cuInit(0), "cuInit", fail)
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.check(lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet", fail)
        self.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain", fail)
        previous = ctypes.c_void_p()
        lib.cuCtxGetCurrent(ctypes.byref(previous))
        self.check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", fail)
        try:
            module = ctypes.c_void_p()
            status = lib.cuModuleLoadData(ctypes.byref(module), image)
            ptx = str(options.get("ptx", ""))
            if status in _OTHER_ARCH_ERRORS and ptx:
                # The cubin is for another arch (sm_80 SASS on an sm_90 device): let the driver
                # JIT-compile the PTX it came from, as a fat binary with PTX would.
                status = lib.cuModuleLoadData(ctypes.byref(module), ptx.encode() + b"\0")
                self.check(status, "cuModuleLoadData(ptx)", fail)
            else:
                self.check(status, "cuModuleLoadData", fail)
            function = ctypes.c_void_p()
            found = lib.cuModuleGetFunction(ctypes.byref(function), module, kernel_name.encode())
            self.check(found, "cuModuleGetFunction", fail)
            static = ctypes.c_int()
            got = lib.cuFuncGetAttribute(ctypes.byref(static), SHARED_SIZE_BYTES, function)
            self.check(got, "cuFuncGetAttribute(SHARED_SIZE_BYTES)", fail)
        finally:
            lib.cuCtxSetCurrent(previous)
        return CudaFunction(lib, int(ctx.value or 0), int(function.value or 0), int(static.value), fail)

    def encode_tensor_map(self, args: Any) -> tuple[Any, int]:
        from .tma import encode

        return encode(args)


_driver_lock = threading.Lock()
_driver: CudaDriver | None = None


def open_driver(location: SourceLocation | None = None) -> CudaDriver:
    """The process's :class:`CudaDriver`; ``CudaDeviceUnavailableError`` without a driver or device."""
    global _driver
    with _driver_lock:
        if _driver is None:
            if not driver_probe():
                raise CudaDeviceUnavailableError(
                    "no CUDA driver or device is present, so the kernel cannot run here",
                    hint="compiling works anywhere; run on a machine with an NVIDIA GPU and driver",
                    location=location,
                )
            _driver = CudaDriver(ctypes.CDLL(_LIBRARY))
        return _driver


class CudaKernel(GpuLauncher):
    """A cubin plus its launch recipe; call it with every kernel parameter in order.

    ``device_type`` tells ``tile.lang``'s ``JITKernel`` to check for (and allocate
    outputs as) torch CUDA tensors. ``driver`` replaces the CUDA driver (a
    ``tile.ir.gpu.testing.RecordingDriver`` in host-side tests and benchmarks).
    """

    launch_error = CudaLaunchError
    vendor = "CUDA"
    tensor_hint = "pass a torch CUDA tensor, e.g. torch.as_tensor(x, device='cuda')"

    def __init__(
        self,
        cubin: bytes,
        recipe: LaunchRecipe,
        params: ParamSpecs,
        location: SourceLocation | None = None,
        ptx: str = "",
        driver: GpuDriver | None = None,
        strides: ParamStrides | None = None,
    ) -> None:
        super().__init__(recipe, params, location, driver, strides)
        self.cubin = cubin
        self.ptx = ptx

    def open_driver(self) -> GpuDriver:
        return open_driver(self.location)

    def load_function(self, driver: GpuDriver, device: int) -> DeviceFunction:
        return driver.load(
            self.cubin, self.recipe.kernel_name, device, ptx=self.ptx, fail=self._fail,
            param_count=len(self.recipe.params),
        )  # fmt: skip

    def by_value_packer(self, param: KernelParam, driver: GpuDriver) -> Packer:
        """A ``tensormap`` parameter: the tensor's TMA descriptor, encoded once per
        (pointer, shape, strides) and passed by value."""
        if param.kind != "tensormap" or param.tma is None:
            return super().by_value_packer(param, driver)
        from .tma import TensorMapPacker, plan_from_json

        packers: dict[tuple[str, str], TensorMapPacker] = self.__dict__.setdefault("_tensor_maps", {})
        key = (param.source, repr(sorted(param.tma.items())))
        if key not in packers:
            encoder = driver.encode_tensor_map  # type: ignore[attr-defined]
            packers[key] = TensorMapPacker(plan_from_json(param.tma), encoder)
        return packers[key]
