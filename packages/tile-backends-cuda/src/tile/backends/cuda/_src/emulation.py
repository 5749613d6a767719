"""CUDA kernels under the CPU emulator (``TILE_DEVICE=emu``).

The kernel's generated CUDA source, unchanged, is compiled by the host C++ compiler
against the CPU implementation of ``tile_cuda.h`` that this package ships and registers
with the emulator (``tile.backends.cuda.emu``, run by ``tile.backends.cpu.simt``) and
launched with the same recipe as on the GPU: grid,
block and dynamic shared memory evaluated from the argument shapes. Arguments are
numpy arrays or CPU torch tensors (``device_type = "cpu"`` tells tile.lang's
``JITKernel`` so).
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

from tile.ir.errors import BackendUnavailableError, SourceLocation

from .. import env
from ..errors import CudaLaunchError
from .codegen import LaunchRecipe
from .cute_headers import emulator_include_dirs
from .runtime import SCALAR_CTYPES, evaluate

WARP_SIZE = 32


def emulating() -> bool:
    """Whether CUDA-target kernels run under the CPU emulator (``TILE_DEVICE=emu``)."""
    return env.TILE_DEVICE.get() == "emu"


def can_emulate() -> bool:
    """Whether ``TILE_DEVICE=emu`` can work here: the emulator (tile-backends-cpu) is installed."""
    try:
        return importlib.util.find_spec("tile.backends.cpu.simt") is not None
    except ImportError:  # tile.backends.cpu itself is missing
        return False


def _simt() -> Any:
    try:
        from tile.backends.cpu import simt
    except ImportError as exc:
        raise BackendUnavailableError(
            "TILE_DEVICE=emu runs CUDA kernels on the CPU emulator, which tile-backends-cpu provides",
            hint="pip install tile-backends-cpu, or unset TILE_DEVICE to launch on a GPU",
        ) from exc
    return simt


def _host_array(value: Any) -> tuple[tuple[int, ...], str, int, bool] | None:
    """(shape, dtype name, data address, C-contiguous) of a numpy array or CPU torch tensor."""
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


def _itemsize(value: Any) -> int:
    """Bytes per element of a numpy array, CPU torch tensor or TVM tensor."""
    if hasattr(value, "element_size"):
        return int(value.element_size())
    if hasattr(value, "itemsize"):
        return int(value.itemsize)
    return (int(value.dtype.bits) * int(getattr(value.dtype, "lanes", 1)) + 7) // 8


TMA_ALIGN = 128
"""Global alignment TMA needs with a swizzle (16 bytes without); staged copies use it."""


def _aligned_copy(value: Any) -> Any:
    """A ``TMA_ALIGN``-aligned numpy copy of a host array's bytes (same shape and itemsize)."""
    import numpy as np

    info = _host_array(value)
    assert info is not None
    shape, _dtype, address, _contiguous = info
    nbytes = _itemsize(value) * int(np.prod(shape, dtype=np.int64))
    raw = np.empty(nbytes + TMA_ALIGN, np.uint8)
    start = (-int(raw.ctypes.data)) % TMA_ALIGN
    staged = raw[start : start + nbytes]
    ctypes.memmove(staged.ctypes.data, address, nbytes)
    return staged


def _nbytes(value: Any) -> int:
    """Bytes of a host array's data (numpy or CPU torch)."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    return int(value.numel()) * _itemsize(value)


class EmulatedCudaKernel:
    """A CUDA kernel's source compiled for the emulator; call it with host arrays.

    Example::

        # TILE_DEVICE=emu
        kernel = tilelang.compile(func, out_idx=[2], target={"kind": "cuda", "arch": "sm_80"})
        c = kernel(a, b)  # numpy in, numpy out, computed by the generated CUDA code
    """

    device_type = "cpu"

    def __init__(
        self,
        source: str,
        recipe: LaunchRecipe,
        params: Sequence[tuple[str, str, tuple[int | str, ...] | None]],
        location: SourceLocation | None = None,
    ) -> None:
        simt = _simt()
        from .. import emu  # the emulated device "cuda": this package's emulation headers

        self.source = source
        self.recipe = recipe
        self.params = list(params)
        self.location = location
        extra = emulator_include_dirs(source)  # CUTLASS etc. for an impl="cute" gemm
        self.library = simt.kernel_library(source, recipe.kernel_name, emu.DEVICE, include_dirs=extra)
        self.simt_kernel = simt.SimtKernel(self.library, warp_size=WARP_SIZE, device=emu.DEVICE)
        self.seed: int | None = None
        """Nonzero: fibers start and wake in a seeded shuffled order instead of round-robin
        (None: ``TILE_EMU_SEED``)."""

    def _fail(self, message: str, hint: str) -> CudaLaunchError:
        return CudaLaunchError(
            f"{message} (kernel {self.recipe.kernel_name}, emulated)", hint=hint, location=self.location
        )

    def bind(self, args: Sequence[Any]) -> tuple[dict[str, int], dict[str, int]]:
        """Check the arguments; returns symbolic-dim/scalar values and each tensor's data address."""
        if len(args) != len(self.params):
            count = len(self.params)
            raise self._fail(f"expected {count} arguments, got {len(args)}", "pass every parameter")
        names: dict[str, int] = {}
        addresses: dict[str, int] = {}
        for (name, dtype, shape), value in zip(self.params, args, strict=True):
            if shape is None:
                names[name] = value
                continue
            info = _host_array(value)
            if info is None:
                raise self._fail(
                    f"argument {name} is a {type(value).__name__}; an emulated kernel takes host arrays",
                    "pass a numpy array or a CPU torch tensor",
                )
            got_shape, got_dtype, address, contiguous = info
            if got_dtype != dtype:
                raise self._fail(
                    f"argument {name} has dtype {got_dtype}, expected {dtype}", f"convert it to {dtype}"
                )
            ok = len(got_shape) == len(shape)
            for got_dim, want in zip(got_shape, shape, strict=False):
                if isinstance(want, int):
                    ok = ok and int(got_dim) == want
                elif want.isidentifier() and names.setdefault(want, int(got_dim)) != int(got_dim):
                    ok = False
            if not ok:
                raise self._fail(
                    f"argument {name} has shape {list(got_shape)}, expected {list(shape)}",
                    "pass an array of the shape the kernel was compiled for",
                )
            if not contiguous:
                raise self._fail(f"argument {name} is not row-major contiguous", "pass a contiguous copy")
            addresses[name] = address
        return names, addresses

    def _tensor_map(self, param: Any, value: Any, address: int) -> Any:
        """The emulator's encoding of ``value``'s TMA tensor map (the GPU launcher asks the driver)."""
        from .tma import encode_arguments, plan_from_json

        shape = tuple(int(d) for d in value.shape)
        strides = tuple(int(s) for s in self._row_major_strides(shape))
        args = encode_arguments(plan_from_json(param.tma), address, shape, strides)
        simt = _simt()
        raw = simt.encode_tensor_map(
            args.data_type,
            args.rank,
            args.global_address,
            args.global_dim,
            args.global_strides,
            args.box_dim,
            args.element_strides,
            args.interleave,
            args.swizzle,
            args.l2_promotion,
            args.oob_fill,
        )
        return simt.TensorMapArgument(raw)

    @staticmethod
    def _row_major_strides(shape: Sequence[int]) -> list[int]:
        strides, step = [], 1
        for dim in reversed(shape):
            strides.append(step)
            step *= max(int(dim), 1)
        return strides[::-1]

    def __call__(self, *args: Any) -> None:
        names, addresses = self.bind(args)
        by_name = {name: value for (name, _, _), value in zip(self.params, args, strict=True)}
        holders: list[Any] = []
        keep: list[Any] = []
        for param in self.recipe.params:
            if param.kind == "tensor":
                holders.append(ctypes.c_void_p(addresses[param.source]))
            elif param.kind == "tensormap":
                value = by_name[param.source]
                address = addresses[param.source]
                if address % TMA_ALIGN:
                    # A GPU tensor that owns its storage is 256-byte aligned; a host array is
                    # as aligned as malloc made it. TMA only reads, so an aligned copy serves.
                    staged = _aligned_copy(value)
                    keep.append(staged)
                    address = int(staged.ctypes.data)
                tensor_map = self._tensor_map(param, value, address)
                keep.append(tensor_map)
                holders.append(tensor_map.value)
            else:
                raw = names.get(param.source, by_name.get(param.source))
                if raw is None:
                    raise self._fail(f"no value for the kernel parameter {param.source}", "pass every scalar")
                holders.append(SCALAR_CTYPES.get(param.dtype, ctypes.c_int32)(raw))
        grid = [evaluate(e, names) for e in self.recipe.grid]
        block = [evaluate(e, names) for e in self.recipe.block]
        shared = evaluate(self.recipe.dynamic_shared, names)
        if min(grid) <= 0:
            return
        tensors = [(name, address, _nbytes(by_name[name])) for name, address in addresses.items()]
        self.simt_kernel.launch(grid, block, shared, holders, seed=self.seed, tensors=tensors)
