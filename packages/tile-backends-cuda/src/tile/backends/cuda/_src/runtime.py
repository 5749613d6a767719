"""Launching a compiled cubin on torch CUDA tensors through the CUDA driver API.

``cuda-bindings`` (``pip install tile-backends-cuda[runtime]``) is imported on the
first launch only, never when the backend's manifest loads. Every argument is
checked (torch CUDA tensor, one device, dtype, shape, contiguous strides) before
anything reaches the driver; without a driver or a device a launch raises
``CudaDeviceUnavailableError``. The kernel runs on ``torch.cuda.current_stream()``.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Sequence
from typing import Any

from tile.ir.errors import SourceLocation
from tile.ir.gpu import KernelLauncher, LaunchRecipe, check_torch_arguments, launch_dims, scalar_argument

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


def _driver() -> Any:
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        try:
            from cuda import cuda as driver  # type: ignore[import-not-found, import-untyped, unused-ignore]
        except ImportError as exc:
            raise CudaDeviceUnavailableError(
                "launching a CUDA kernel needs the cuda-bindings package",
                hint="pip install 'tile-backends-cuda[runtime]' (cuda-bindings); compiling works without it",
            ) from exc
    return driver


def _check(driver: Any, result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        name = driver.cuGetErrorName(err)
        text = name[1].decode() if isinstance(name, tuple) and len(name) > 1 and name[1] else str(err)
        raise CudaLaunchError(f"{what} failed: {text}", hint="check the device and the driver version")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def driver_probe() -> bool:
    """Whether a CUDA driver with at least one device is present. Never raises; cheap."""
    try:
        lib = ctypes.CDLL("libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll")
        if lib.cuInit(0) != 0:
            return False
        count = ctypes.c_int(0)
        return bool(lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0)
    except Exception:
        return False


class CudaKernel(KernelLauncher):
    """A cubin plus its launch recipe; call it with every kernel parameter in order.

    ``device_type`` tells ``tile.lang``'s ``JITKernel`` to check for (and allocate
    outputs as) torch CUDA tensors.
    """

    device_type = "cuda"
    launch_error = CudaLaunchError

    def __init__(
        self,
        cubin: bytes,
        recipe: LaunchRecipe,
        params: Sequence[tuple[str, str, tuple[int | str, ...] | None]],
        location: SourceLocation | None = None,
        ptx: str = "",
    ) -> None:
        super().__init__(recipe, params, location)
        self.cubin = cubin
        self.ptx = ptx
        self._functions: dict[int, Any] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ checks
    def check_arguments(self, args: Sequence[Any]) -> tuple[dict[str, int], int]:
        """Check every argument; returns the symbolic-dim/scalar values and the device index."""
        return check_torch_arguments(
            self.params,
            args,
            self._fail,
            "CUDA",
            "pass a torch CUDA tensor, e.g. torch.as_tensor(x, device='cuda')",
        )

    # ------------------------------------------------------------------ launch
    def _tensor_map(self, param: Any, tensor: Any) -> int:
        """The encoded map of ``tensor`` for a ``tensormap`` parameter (cached per tensor)."""
        from .tma import TensorMapCache, map_address, plan_from_json

        cache = self.__dict__.setdefault("_tma_maps", TensorMapCache())
        return map_address(cache, plan_from_json(param.tma), tensor)

    def _function(self, driver: Any, device: int) -> Any:
        with self._lock:
            if device in self._functions:
                return self._functions[device]
            _check(driver, driver.cuInit(0), "cuInit")
            dev = _check(driver, driver.cuDeviceGet(device), "cuDeviceGet")
            ctx = _check(driver, driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            _check(driver, driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            err, module = driver.cuModuleLoadData(self.cubin)
            if int(err) in _OTHER_ARCH_ERRORS and self.ptx:
                # The cubin is for another arch (sm_80 SASS on an sm_90 device): let the driver
                # JIT-compile the PTX it came from, as a fat binary with PTX would.
                jit = driver.cuModuleLoadData(self.ptx.encode() + b"\0")
                module = _check(driver, jit, "cuModuleLoadData(ptx)")
            else:
                module = _check(driver, (err, module), "cuModuleLoadData")
            func = _check(
                driver,
                driver.cuModuleGetFunction(module, self.recipe.kernel_name.encode()),
                "cuModuleGetFunction",
            )
            self._functions[device] = (module, func)
            return self._functions[device]

    def _allow_dynamic_shared(self, driver: Any, func: Any, dynamic: int) -> None:
        """Opt ``func`` in to ``dynamic`` bytes of dynamic shared memory when the launch needs it."""
        attrs = driver.CUfunction_attribute
        statics = self.__dict__.setdefault("_static_shared", {})
        key = id(func)
        if key not in statics:
            found = driver.cuFuncGetAttribute(attrs.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func)
            statics[key] = int(_check(driver, found, "cuFuncGetAttribute(SHARED_SIZE_BYTES)"))
        value = dynamic_shared_opt_in(statics[key], dynamic)
        if value is None:
            return
        attr = attrs.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        what = f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={value}, static {statics[key]} bytes)"
        _check(driver, driver.cuFuncSetAttribute(func, attr, value), what)

    def __call__(self, *args: Any) -> None:
        names, device = self.check_arguments(args)
        if not driver_probe():
            raise CudaDeviceUnavailableError(
                "no CUDA driver or device is present, so the kernel cannot run here",
                hint="compiling works anywhere; run on a machine with an NVIDIA GPU and driver",
                location=self.location,
            )
        driver = _driver()
        torch = sys.modules["torch"]
        _, func = self._function(driver, device)
        by_name = {name: value for (name, _, _), value in zip(self.params, args, strict=True)}
        holders: list[Any] = []
        maps: dict[int, int] = {}  # holder index -> address of a by-value tensor map
        for param in self.recipe.params:
            if param.kind == "tensormap":
                maps[len(holders)] = self._tensor_map(param, by_name[param.source])
                holders.append(None)
            elif param.kind == "tensor":
                holders.append(ctypes.c_void_p(int(by_name[param.source].data_ptr())))
            else:
                holders.append(scalar_argument(param, names, by_name, self._fail))
        addresses = (ctypes.c_void_p * max(len(holders), 1))(
            *[maps[i] if i in maps else ctypes.addressof(h) for i, h in enumerate(holders)]
        )
        grid, block, shared = launch_dims(self.recipe, names, self._fail)
        self._allow_dynamic_shared(driver, func, shared)
        if min(grid) <= 0:
            return  # an empty problem: nothing to launch
        with torch.cuda.device(device):
            stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
            _check(
                driver,
                driver.cuLaunchKernel(func, *grid, *block, shared, stream, ctypes.addressof(addresses), 0),
                f"cuLaunchKernel({self.recipe.kernel_name})",
            )
