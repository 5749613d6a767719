"""Target ``"auto"``: a kernel compiles for the device its tensors live on.

With no target given and no ``TILE_DEFAULT_TARGET``, ``tile.lang.jit``/``compile`` return an
``AutoTargetKernel``. At each call it reads where the tensor arguments live
(``__dlpack_device__()``: torch tensors, numpy arrays, any DLPack producer) and asks the
backends, through ``tile.ir.backend.target_for_device``, which of them runs there and for
which arch; it compiles once per device. A CUDA tensor gets its GPU's ``sm_XY``, a ROCm
tensor its ``gfxNNN``, host arrays the CPU backend. Where no tensor is at hand
(``get_kernel_source()`` before any call) the backends' ``"auto"`` rule decides.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.backend import DLPACK_DEVICE_NAMES, BackendManifest, resolve_target, target_for_device
from tile.ir.target import Target

from ..errors import KernelArgumentError
from .callsite import call_site

DeviceKey = tuple[int, int]


class MixedDeviceError(KernelArgumentError):
    """A kernel compiled for the device of its tensors was given tensors on several devices."""


def device_of(value: Any) -> DeviceKey | None:
    """``(dlpack_device_type, index)`` of an array argument; ``None`` for scalars."""
    probe = getattr(value, "__dlpack_device__", None)
    if probe is None or isinstance(value, type):
        return None
    try:
        device_type, index = probe()
    except Exception:  # an array type that cannot say (e.g. a read-only numpy view): the host
        return (1, 0)
    return (int(device_type), int(index or 0))


def describe(device: DeviceKey) -> str:
    name = DLPACK_DEVICE_NAMES.get(device[0], f"device type {device[0]}")
    return f"{name}:{device[1]}" if name not in ("cpu",) else "cpu"


def arguments_device(args: Sequence[Any], names: Sequence[str]) -> DeviceKey | None:
    """The one device the array arguments share, or ``None`` when none is an array.

    Raises:
        MixedDeviceError: arrays on different devices; the message names each argument.
    """
    found: dict[DeviceKey, list[str]] = {}
    for position, value in enumerate(args):
        device = device_of(value)
        if device is not None:
            name = names[position] if position < len(names) else f"#{position}"
            found.setdefault(device, []).append(name)
    if len(found) > 1:
        where = "; ".join(f"{', '.join(args_)} on {describe(dev)}" for dev, args_ in found.items())
        raise MixedDeviceError(
            f"the kernel's tensors live on different devices: {where}",
            hint="move every tensor to one device (e.g. x.cuda() or x.cpu()), "
            "or pass target=... to compile for one device explicitly",
            location=call_site(),
        )
    return next(iter(found), None)


def _accelerator_device() -> DeviceKey | None:
    """Where torch puts tensors by default when it has an accelerator (a GPU), else None.

    With no tensor at hand (``get_profiler()``, ``get_kernel_source()`` before a call), a
    kernel is compiled for the device the program's torch tensors will most likely be on,
    as TileLang compiles for the GPU it finds.
    """
    torch = sys.modules.get("torch")
    accelerator = getattr(torch, "accelerator", None)
    if torch is None or accelerator is None:
        return None
    try:
        current = accelerator.current_accelerator()
        return device_of(torch.empty(0, device=current)) if current is not None else None
    except Exception:  # a torch that cannot make a tensor there: no preference
        return None


class AutoTargetKernel:
    """A kernel compiled at its first call, for the device its tensor arguments live on.

    Calls with tensors on another device compile (once) for that device too. Attributes of
    a compiled kernel (``get_kernel_source``, ``get_profiler``, ``params``, ...) are those
    of the kernel for the last device called with, or, before any call, of the kernel the
    backends' ``"auto"`` rule picks.

    Example::

        kernel = tilelang.compile(add_kernel, out_idx=[-1])   # no target
        c = kernel(a_cpu, b_cpu)                               # compiles for the CPU
    """

    def __init__(
        self,
        func: Any,
        build: Callable[[Target, BackendManifest], Any],
        input_names: Sequence[str],
    ) -> None:
        self.func = func
        self._build = build
        self._input_names = list(input_names)
        self._kernels: dict[DeviceKey | None, Any] = {}
        self._last: Any = None

    def kernel_for(self, device: DeviceKey | None) -> Any:
        """The compiled kernel for arrays on ``device`` (``None``: no array at hand)."""
        if device is None:
            device = _accelerator_device()
        kernel = self._kernels.get(device)
        if kernel is None:
            if device is None:
                target, manifest = resolve_target("auto")
            else:
                target, manifest = target_for_device(*device)
            kernel = self._build(target, manifest)
            self._kernels[device] = kernel
        self._last = kernel
        return kernel

    def __call__(self, *args: Any) -> Any:
        return self.kernel_for(arguments_device(args, self._input_names))(*args)

    def _current(self) -> Any:
        return self._last if self._last is not None else self.kernel_for(None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_last", "_kernels", "_build", "_input_names"):
            raise AttributeError(name)
        return getattr(self._current(), name)

    def __repr__(self) -> str:
        name = getattr(self.func, "__name__", "main")
        return f"<AutoTargetKernel {name}: compiled for {len(self._kernels)} device(s)>"
