"""A native launch path for :mod:`.launcher`: one C++ call checks, packs and launches.

``GpuLauncher``'s per-call path in Python costs a few microseconds of host time (the
signature check, the parameter writes, two ctypes calls into the driver). Where a C++
compiler is present, ``native_launch.cc`` is built once into the cache (sealed, verified
before every load, like every native library tile caches) and loaded through apache-tvm-ffi,
whose calling convention takes torch tensors directly (DLPack, no copies). A plan made here
from a launcher's plan describes every argument (dtype, shape, device, contiguity,
alignment; a scalar's type, and its value where the launch dims read it) and the vendor's
launch and scope-query functions as C function pointers; the native call then does in one
step what the Python path does, and answers "miss" for anything it does not handle, which
the Python path then does.

Nothing here is needed: without a compiler (or with ``TILE_NATIVE_LAUNCH=0``) every call
takes the Python path. No compiler is needed at install time.

Example::

    launch = native_launch_function()      # None: no compiler, or turned off
    plan = NativePlan.build(...)           # None: a signature it does not handle
    status = launch(plan.address, stream, *arguments)   # 0 launched, 1 miss, <0 -status
"""

from __future__ import annotations

import ctypes
import functools
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from .. import env, host_toolchain

SOURCE = pathlib.Path(__file__).with_name("native_launch.cc")
MAX_DIMS = 8
LAUNCHED, MISS = 0, 1

TENSOR, TENSOR_BY_VALUE, INT_SCALAR, FLOAT_SCALAR = 0, 1, 2, 3
HOLDER_CODES = {ctypes.c_int32: 0, ctypes.c_int64: 1, ctypes.c_float: 2, ctypes.c_double: 3}


class ArgSpec(ctypes.Structure):
    """``TileArgSpec`` of native_launch.cc: what one argument must be and where it goes."""

    _fields_ = [
        ("kind", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype_code", ctypes.c_int32),
        ("dtype_bits", ctypes.c_int32),
        ("dtype_lanes", ctypes.c_int32),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("holder_code", ctypes.c_int32),
        ("valued", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("align", ctypes.c_int64),
        ("holder", ctypes.c_void_p),
        ("expect_i", ctypes.c_int64),
        ("expect_f", ctypes.c_double),
        ("expect_ptr", ctypes.c_uint64),
    ]


class Plan(ctypes.Structure):
    """``TilePlan`` of native_launch.cc: the launch, with its argument specs."""

    _fields_ = [
        ("nargs", ctypes.c_int32),
        ("scope_bytes", ctypes.c_int32),
        ("args", ctypes.POINTER(ArgSpec)),
        ("function", ctypes.c_void_p),
        ("launch", ctypes.c_void_p),
        ("query", ctypes.c_void_p),
        ("select", ctypes.c_void_p),
        ("scope", ctypes.c_uint64),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("shared", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("params", ctypes.c_void_p),
    ]


def _build(cxx: str, output: pathlib.Path) -> bool:
    import tvm_ffi.libinfo

    include = tvm_ffi.libinfo.find_include_path()
    library = pathlib.Path(tvm_ffi.libinfo.find_libtvm_ffi())
    args = ["-O2", "-std=c++17", "-shared", "-fPIC", f"-I{include}", str(SOURCE),
            f"-L{library.parent}", "-ltvm_ffi", f"-Wl,-rpath,{library.parent}"]  # fmt: skip
    try:
        return host_toolchain.build_shared_library(cxx, args, output).returncode == 0
    except OSError:
        return False


@functools.cache
def native_launch_function() -> Callable[..., int] | None:
    """``tile_gpu_launch`` of the built library, or None (no compiler, a failed build, or
    ``TILE_NATIVE_LAUNCH=0``). Built once per source, compiler and tvm-ffi version."""
    if not env.NATIVE_LAUNCH.get():
        return None
    try:
        cxx = host_toolchain.find_host_compiler()
    except host_toolchain.HostCompilerNotFoundError:
        return None
    import tvm_ffi

    digest = host_toolchain.content_digest(SOURCE.read_bytes(), cxx, str(tvm_ffi.__version__))
    output = host_toolchain.cache_dir("native") / f"libtile_gpu_launch-{digest}.so"
    if not host_toolchain.is_built(output) and not _build(cxx, output):
        return None
    try:
        module = tvm_ffi.load_module(str(output))
        if int(module["tile_gpu_layout"]()) != ctypes.sizeof(Plan) * 1000 + ctypes.sizeof(ArgSpec):
            return None  # the ctypes mirror and the C++ structs disagree: never call it
        function: Callable[..., int] = module["tile_gpu_launch"]
    except Exception:
        return None
    return function


@functools.cache
def _dl_type(dtype: Any, device: Any) -> tuple[int, int, int, int, int] | None:
    """``(code, bits, lanes, device_type, device_id)`` DLPack gives a tensor of ``dtype`` on
    ``device``, as tvm-ffi hands it to the native call; None where it cannot say."""
    try:
        import torch
        import tvm_ffi

        view = tvm_ffi.from_dlpack(torch.empty(0, dtype=dtype, device=device))
        code, bits, lanes = (int(v) for v in (view.dtype.type_code, view.dtype.bits, view.dtype.lanes))
        return code, bits, lanes, int(view.device.dlpack_device_type()), int(view.device.index)
    except Exception:
        return None


class NativePlan:
    """A launcher plan described for ``tile_gpu_launch`` (``address``), with what keeps it alive."""

    def __init__(self, specs: Sequence[ArgSpec], plan: Plan, keep: Sequence[Any]) -> None:
        self.specs = (ArgSpec * len(specs))(*specs)
        plan.args = ctypes.cast(self.specs, ctypes.POINTER(ArgSpec))
        self.plan = plan
        self.keep = keep
        self.address = ctypes.addressof(plan)

    def expect_pointer(self, position: int, pointer: int) -> None:
        """The by-value parameter at ``position`` was packed (again) for ``pointer``."""
        self.specs[position].expect_ptr = pointer

    @classmethod
    def build(
        cls,
        signature: Sequence[Any],
        holders: Sequence[Any],
        valued: Sequence[int],
        align: int,
        launch: tuple[int, int, int, int, int, int],
        dims: tuple[tuple[int, int, int], tuple[int, int, int], int],
        params: int,
    ) -> NativePlan | None:
        """The plan, or None where an argument is of a kind the native call does not check.

        ``signature``: per argument (inputs and outputs in parameter order), the launcher's
        key entry (``(dtype, shape, device, contiguous)`` or a scalar's type, ``(entry, value)``
        where ``valued``); ``holders``: per argument, its kernel-parameter holder (a ctypes
        value), ``("by_value", pointer)`` for a by-value parameter, or None (not a parameter);
        ``launch``: ``(function, launch_fn, query_fn, select_fn, scope, scope_bytes)`` (C function
        addresses; the scope is what ``query_fn`` writes for the device, a context or an index);
        ``dims``: grid, block, dynamic shared bytes; ``params``: the parameter array's address.
        """
        specs = []
        for index, (entry, holder) in enumerate(zip(signature, holders, strict=True)):
            spec = ArgSpec()
            spec.align = align
            if index in valued:
                entry, value = entry
                spec.valued = 1
                if isinstance(value, float):
                    spec.expect_f = value
                elif isinstance(value, int):
                    spec.expect_i = int(value)
                else:
                    return None
            if isinstance(entry, tuple) and len(entry) == 4:
                dtype, shape, device, contiguous = entry
                dl = _dl_type(dtype, device)
                if dl is None or not contiguous or len(shape) > MAX_DIMS:
                    return None
                spec.dtype_code, spec.dtype_bits, spec.dtype_lanes, spec.device_type, spec.device_id = dl
                spec.ndim = len(shape)
                for k, d in enumerate(shape):
                    spec.shape[k] = int(d)
                if isinstance(holder, tuple):
                    spec.kind, spec.expect_ptr = TENSOR_BY_VALUE, int(holder[1])
                else:
                    spec.kind = TENSOR
                    spec.holder = ctypes.addressof(holder) if holder is not None else None
            elif entry in (int, bool, float) and holder is not None and not isinstance(holder, tuple):
                code = HOLDER_CODES.get(type(holder))
                if code is None:
                    return None
                spec.kind = FLOAT_SCALAR if entry is float else INT_SCALAR
                spec.holder_code, spec.holder = code, ctypes.addressof(holder)
            else:
                return None
            specs.append(spec)
        function, launch_fn, query_fn, select_fn, scope, scope_bytes = launch
        plan = Plan()
        plan.nargs = len(specs)
        plan.scope_bytes = scope_bytes
        plan.function, plan.launch, plan.query, plan.select = function, launch_fn, query_fn, select_fn
        plan.scope = scope & ((1 << (8 * scope_bytes)) - 1)
        plan.grid[:], plan.block[:], plan.shared = dims[0], dims[1], dims[2]
        plan.params = params
        return cls(specs, plan, list(holders))


def function_address(fn: Any) -> int:
    """The C address of a ctypes function object."""
    return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)


__all__ = ["LAUNCHED", "MISS", "NativePlan", "function_address", "native_launch_function"]
