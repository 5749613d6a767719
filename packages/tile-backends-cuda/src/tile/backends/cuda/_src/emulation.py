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

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tile.ir.annotations import IMPORTED_SOURCE_LINES, IMPORTED_SOURCES
from tile.ir.errors import BackendUnavailableError, SourceLocation, UnsupportedOnTargetError
from tile.ir.gpu import EmulatedKernel, KernelParam
from tile.ir.gpu.emulation import host_array, host_strides, itemsize
from tile.ir.gpu.launch import memory_span

from .. import env
from ..arch import parse_arch
from ..errors import CudaLaunchError
from . import inline_ptx
from .cute_headers import emulator_include_dirs

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


def check_imported_sources(func: Any, kernel: str, arch: str) -> None:
    """Refuse a kernel whose ``T.import_source`` code has inline assembly (PTX) that the
    emulator cannot translate (``inline_ptx``: bit operations, ``lop3``, ``prmt`` and packed
    16-bit float arithmetic are rewritten as C++; the host assembler takes no PTX).

    Raises:
        UnsupportedOnTargetError: at the ``T.import_source`` line of the first such code.
    """
    attrs = func.attrs if func.attrs is not None else {}
    lines = [str(line) for line in attrs.get(IMPORTED_SOURCE_LINES, [])]
    for index, code in enumerate(str(c) for c in attrs.get(IMPORTED_SOURCES, [])):
        if not inline_ptx.has_inline_asm(code):
            continue
        try:
            cuda_arch = parse_arch(arch)
            inline_ptx.translate(code, cuda_arch.major * 10 + cuda_arch.minor)
        except inline_ptx.InlinePtxError as exc:
            filename, _, line = lines[index].rpartition(":") if index < len(lines) else ("", "", "")
            where = SourceLocation.from_file(filename, int(line)) if filename and line.isdigit() else None
            raise UnsupportedOnTargetError(
                f"kernel {kernel}: the code given to T.import_source has inline PTX the CUDA emulator "
                f"(TILE_DEVICE=emu) cannot run: {exc} in {exc.statement!r}. The emulator compiles the "
                "kernel's source for the CPU and rewrites only the instructions it knows as C++",
                hint="run it on a GPU (unset TILE_DEVICE), or import a version of the function written in "
                "plain CUDA C++ (no asm statements) to run it on the emulator",
                location=where,
            ) from None


TMA_ALIGN = 128
"""Global alignment TMA needs with a swizzle (16 bytes without); staged copies use it."""


def _aligned_copy(value: Any, strides: Sequence[int] | None = None) -> Any:
    """A ``TMA_ALIGN``-aligned numpy copy of a host array's bytes (same shape and itemsize): its
    elements, or with element ``strides`` (a ``T.StridedTensor``'s view) every byte of its span."""
    import ctypes

    import numpy as np

    info = host_array(value)
    assert info is not None
    shape, _dtype, address, _contiguous = info
    if strides is not None:
        nbytes = memory_span(shape, strides, itemsize(value))
    else:
        nbytes = itemsize(value) * int(np.prod(shape, dtype=np.int64))
    raw = np.empty(nbytes + TMA_ALIGN, np.uint8)
    start = (-int(raw.ctypes.data)) % TMA_ALIGN
    staged = raw[start : start + nbytes]
    ctypes.memmove(staged.ctypes.data, address, nbytes)
    return staged


class EmulatedCudaKernel(EmulatedKernel):
    """A CUDA kernel's source compiled for the emulator; call it with host arrays (example:
    :class:`tile.ir.gpu.EmulatedKernel`). TMA tensor-map parameters are encoded by the emulator."""

    launch_error = CudaLaunchError
    where = ", emulated"

    warp_size = WARP_SIZE

    def emulator(self) -> tuple[Any, Any]:
        simt = _simt()
        from .. import emu  # the emulated device "cuda": this package's emulation headers

        return simt, emu.DEVICE

    def include_dirs(self, source: str) -> Sequence[Path]:
        return emulator_include_dirs(source)  # CUTLASS etc. for an impl="cute" gemm

    def host_source(self, source: str) -> str:
        # inline PTX of T.import_source code, as C++ (the build checked that it translates); asm
        # that does not translate stays: TVM's prelude keeps some under #if __CUDA_ARCH__
        return inline_ptx.translate(source, strict=False)

    _staged: list[tuple[int, Any, Any]]

    def __call__(self, *args: Any) -> None:
        import ctypes

        import numpy as np

        self._staged = []  # (the array's address, its aligned copy, the copy as staged)
        super().__call__(*args)
        for address, staged, before in self._staged:
            # what TMA stores wrote into the copy goes back, byte by byte (other bytes of the
            # array may have been written through a plain pointer parameter meanwhile)
            changed = np.flatnonzero(staged != before)
            if changed.size:
                original = np.ctypeslib.as_array((ctypes.c_uint8 * staged.size).from_address(address))
                original[changed] = staged[changed]

    def _extra_argument(self, param: KernelParam, value: Any, address: int, keep: list[Any]) -> Any:
        """A ``tensormap`` parameter: the emulator's encoding of the tensor's TMA map."""
        if param.kind != "tensormap":
            return super()._extra_argument(param, value, address, keep)
        if address % TMA_ALIGN:
            # A GPU tensor that owns its storage is 256-byte aligned; a host array is
            # as aligned as malloc made it: TMA works on an aligned copy, and what its
            # stores change there is copied back after the launch.
            staged = _aligned_copy(value, self._strides_of(param.source, value))
            keep.append(staged)
            self._staged.append((address, staged, staged.copy()))
            address = int(staged.ctypes.data)
        tensor_map = self._tensor_map(param, value, address)
        keep.append(tensor_map)
        return tensor_map.value

    def _tensor_map(self, param: Any, value: Any, address: int) -> Any:
        """The emulator's encoding of ``value``'s TMA tensor map (the GPU launcher asks the driver)."""
        from .tma import encode_arguments, plan_from_json

        shape = tuple(int(d) for d in value.shape)
        strides = self._strides_of(param.source, value) or tuple(self._row_major_strides(shape))
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

    def _strides_of(self, name: str, value: Any) -> tuple[int, ...] | None:
        """A ``T.StridedTensor`` argument's element strides (its map's); None for a row-major one."""
        return host_strides(value) if name in self.strides else None

    @staticmethod
    def _row_major_strides(shape: Sequence[int]) -> list[int]:
        strides, step = [], 1
        for dim in reversed(shape):
            strides.append(step)
            step *= max(int(dim), 1)
        return strides[::-1]
