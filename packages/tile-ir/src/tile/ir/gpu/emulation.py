"""GPU kernels run on host arrays by a CPU emulator (``TILE_DEVICE=emu``), vendor-neutral part.

A vendor backend compiles its kernel's generated source against its emulation header
with the emulator (in tile-backends-cpu, which tile-ir does not depend on) and hands the
loaded kernel to :class:`EmulatedKernel`, which checks the host arguments, packs the
launch recipe's parameters and launches grid, block and dynamic shared memory as
evaluated from the argument shapes: the same recipe as on the GPU.
"""

from __future__ import annotations

import ctypes
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import SourceLocation
from .launch import (
    Fail,
    KernelLauncher,
    KernelParam,
    LaunchRecipe,
    ParamSpecs,
    ParamStrides,
    argument_shape,
    argument_strides,
    check_shape,
    check_strides,
    launch_dims,
    memory_span,
    scalar_argument,
)


def host_array(value: Any) -> tuple[tuple[int, ...], str, int, bool] | None:
    """``(shape, dtype name, data address, C-contiguous)`` of a numpy array, CPU torch tensor or
    CPU TVM tensor; ``None`` for anything else (a GPU tensor, a list)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            return None
        dtype = str(value.dtype).removeprefix("torch.")
        return tuple(value.shape), dtype, int(value.data_ptr()), bool(value.is_contiguous())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return value.shape, str(value.dtype), int(value.ctypes.data), bool(value.flags.c_contiguous)
    if type(value).__module__.startswith("tvm.runtime") and callable(getattr(value, "data_ptr", None)):
        # a TVM tensor (tile.lang hands bfloat16 and other non-numpy dtypes over as one)
        if not str(value.device).startswith("cpu"):
            return None
        return (
            tuple(int(d) for d in value.shape),
            str(value.dtype),
            int(value.data_ptr()),
            bool(value.is_contiguous()),
        )
    return None


def host_strides(value: Any) -> tuple[int, ...] | None:
    """A host array's element strides (numpy, CPU torch or TVM); None where they are not whole
    elements or not known."""
    if hasattr(value, "stride") and callable(value.stride):  # torch
        return tuple(int(s) for s in value.stride())
    steps = getattr(value, "strides", None)
    if steps is None:
        return None
    size = itemsize(value)
    if hasattr(value, "ctypes"):  # numpy: strides in bytes
        if any(int(s) % size for s in steps):
            return None
        return tuple(int(s) // size for s in steps)
    return tuple(int(s) for s in steps)  # a TVM tensor: strides in elements


def itemsize(value: Any) -> int:
    """Bytes per element of a numpy array, CPU torch tensor or TVM tensor."""
    if hasattr(value, "element_size"):
        return int(value.element_size())
    if hasattr(value, "itemsize"):
        return int(value.itemsize)
    return (int(value.dtype.bits) * int(getattr(value.dtype, "lanes", 1)) + 7) // 8


def nbytes(value: Any) -> int:
    """Bytes of a host array's data (numpy, CPU torch or TVM)."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    return int(value.numel()) * itemsize(value)


def bind_host_arguments(
    params: ParamSpecs, args: Sequence[Any], fail: Fail, strides: ParamStrides | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """Check host arguments against ``params`` (and the ``T.StridedTensor`` parameters' declared
    ``strides``); returns the symbolic-dim, symbolic-stride and scalar values and each tensor's
    data address. A mismatch raises ``fail(message, hint)``."""
    if len(args) != len(params):
        raise fail(f"expected {len(params)} arguments, got {len(args)}", "pass every parameter")
    declared_strides = strides or {}
    names: dict[str, int] = {}
    addresses: dict[str, int] = {}
    for (name, dtype, shape), value in zip(params, args, strict=True):
        if shape is None:
            names[name] = value
            continue
        info = host_array(value)
        if info is None:
            raise fail(
                f"argument {name} is a {type(value).__name__}; an emulated kernel takes host arrays",
                "pass a numpy array or a CPU torch tensor",
            )
        got_shape, got_dtype, address, contiguous = info
        logical = argument_shape(name, dtype, got_dtype, tuple(got_shape), fail)
        check_shape(name, logical, shape, names, fail, "pass an array")
        if name in declared_strides:
            steps = host_strides(value)
            if steps is None or any(s < 0 for s in steps):
                raise fail(
                    f"argument {name} has strides that are not whole non-negative elements",
                    "pass a view of whole elements, or a contiguous copy",
                )
            logical_steps = argument_strides(name, dtype, got_dtype, tuple(got_shape), steps, fail)
            check_strides(name, logical_steps, declared_strides[name], names, fail)
        elif not contiguous:
            raise fail(f"argument {name} is not row-major contiguous", "pass a contiguous copy")
        addresses[name] = address
    return names, addresses


class EmulatedKernel(KernelLauncher):
    """A kernel the emulator loaded (``simt_kernel``), called with host arrays.

    The constructor compiles the vendor's generated source with the emulator that
    ``emulator()`` returns, against the emulation header of the vendor's registered device,
    into ``simt_kernel`` (whose ``launch(grid, block, shared, arguments, seed=, tensors=)``
    runs it). Subclasses say which emulator and device (``emulator``), the lanes of a warp
    (``warp_size``), and name their launch error (``launch_error``). A recipe parameter
    kind other than ``tensor`` and ``scalar`` goes to ``_extra_argument``.

    Example (a vendor's subclass, as ``tile.lang`` loads it)::

        # TILE_DEVICE=emu
        kernel = tilelang.compile(func, out_idx=[2], target={"kind": "hip", "mcpu": "gfx90a"})
        c = kernel(a, b)  # numpy in, numpy out, computed by the generated HIP code
    """

    device_type = "cpu"
    """Tells ``tile.lang``'s ``JITKernel`` to hand over (and allocate outputs as) host arrays."""

    warp_size = 32
    """Lanes of a warp (a wavefront: 64 for HIP) as the emulator runs the kernel."""
    seed: int | None = None
    """Nonzero: fibers start and wake in a seeded shuffled order instead of round-robin
    (None: the emulator's default, ``TILE_EMU_SEED``)."""

    def __init__(
        self,
        source: str,
        recipe: LaunchRecipe,
        params: ParamSpecs,
        location: SourceLocation | None = None,
        strides: ParamStrides | None = None,
    ) -> None:
        simt, device = self.emulator()
        super().__init__(recipe, params, location, strides)
        self.source = source
        extra = self.include_dirs(source)
        host = self.host_source(source)
        self.library = simt.kernel_library(host, recipe.kernel_name, device, include_dirs=extra)
        self.simt_kernel = simt.SimtKernel(self.library, warp_size=self.warp_size, device=device)

    def _span(self, name: str, value: Any) -> int:
        """Bytes the kernel may touch from a tensor's address: a strided view's whole span."""
        steps = host_strides(value) if name in self.strides else None
        if steps is None:
            return nbytes(value)
        return memory_span(tuple(int(d) for d in value.shape), steps, itemsize(value))

    def emulator(self) -> tuple[Any, Any]:
        """``(emulator module, device)``: ``tile.backends.cpu.simt`` (tile-ir does not import it;
        the vendor raises its own error where it is missing) and the vendor's emulated device."""
        raise NotImplementedError(f"{type(self).__name__} must name its emulator and device")

    def include_dirs(self, source: str) -> Sequence[pathlib.Path]:
        """Header directories ``source`` needs beyond the device's own (none by default)."""
        return ()

    def host_source(self, source: str) -> str:
        """The source the emulator compiles for the host: ``source`` itself by default; a vendor
        rewrites what the host compiler cannot take (CUDA: inline PTX)."""
        return source

    def bind(self, args: Sequence[Any]) -> tuple[dict[str, int], dict[str, int]]:
        """Check the arguments; returns symbolic-dim/scalar values and each tensor's data address."""
        return bind_host_arguments(self.params, args, self._fail, self.strides)

    def _extra_argument(self, param: KernelParam, value: Any, address: int, keep: list[Any]) -> Any:
        """The launch argument of a vendor parameter kind; objects in ``keep`` outlive the launch."""
        raise self._fail(
            f"the kernel parameter {param.source} is of kind {param.kind!r}, which this emulator cannot pass",
            "rebuild the kernel for this backend",
        )

    def __call__(self, *args: Any) -> None:
        names, addresses = self.bind(args)
        by_name = {name: value for (name, _, _), value in zip(self.params, args, strict=True)}
        holders: list[Any] = []
        keep: list[Any] = []
        for param in self.recipe.params:
            if param.kind == "tensor":
                holders.append(ctypes.c_void_p(addresses[param.source]))
            elif param.kind == "scalar":
                holders.append(scalar_argument(param, names, by_name, self._fail))
            else:
                value = by_name[param.source]
                holders.append(self._extra_argument(param, value, addresses[param.source], keep))
        grid, block, shared = launch_dims(self.recipe, names, self._fail)
        if min(grid) <= 0:
            return
        tensors = [(name, address, self._span(name, by_name[name])) for name, address in addresses.items()]
        self.simt_kernel.launch(grid, block, shared, holders, seed=self.seed, tensors=tensors)
