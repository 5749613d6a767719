"""A native launch path for :mod:`.launcher`: one C++ call finds the plan, allocates, packs and launches.

``GpuLauncher``'s per-call path in Python costs a few microseconds of host time (the
signature check, the output's ``torch.empty``, the parameter writes, ctypes calls into the
driver). Where a C++ compiler is present, ``native_launch.cc`` is built once into the cache
(sealed, verified before every load, like every native library tile caches) and loaded
through apache-tvm-ffi, whose calling convention takes torch tensors as they are (DLPack, no
copies) and installs, for the duration of a call, torch's allocator and torch's current
stream of the tensors' device. A :class:`NativeTable` holds the plans of one kernel binding
(one per argument signature), each describing every argument (dtype, shape, device,
contiguity, alignment; a scalar's type, and its value where the launch dims read it), the
outputs to allocate, the kernel parameter each argument feeds, and the vendor's launch and
scope functions as C function pointers. ``tile_gpu_call(table, *inputs)`` then does in one
step what the Python path does: it finds the plan whose signature the inputs have, allocates
the outputs from torch's caching allocator on the tensors' device, packs the parameters on
its own stack (so calls share no state and need no lock) and launches on torch's current
stream. It answers the first output (``tile_gpu_take`` hands out the others: tvm-ffi makes
a returned tensor a torch tensor, not the tensors in a returned array), or "miss" for
anything no plan describes, which the Python path then does.

The call holds the GIL throughout (``release_gil`` off: it is shorter than handing the GIL
over), so Python's writes to a table (a new plan, a TMA map encoded for a new data pointer)
never interleave with a call.

Nothing here is needed: without a compiler (or with ``TILE_NATIVE_LAUNCH=0``) every call
takes the Python path. No compiler is needed at install time.

Example::

    call = native_call_function()           # None: no compiler, or turned off
    table = NativeTable()
    table.add(NativePlan.build(...))        # False: a signature it does not handle
    result = call(table.address, *inputs)   # the (first) output, or None; 1: miss; <0: -status
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from .. import env, host_toolchain

SOURCE = pathlib.Path(__file__).with_name("native_launch.cc")
MAX_DIMS, MAX_PARAMS, MAPS, MAX_PLANS, MAX_OUTPUTS = 8, 64, 4, 256, 8
MISS = 1

TENSOR, OUTPUT, INT_SCALAR, BOOL_SCALAR, FLOAT_SCALAR = 0, 1, 2, 3, 4
HOLDER_CODES = {ctypes.c_int32: 0, ctypes.c_int64: 1, ctypes.c_float: 2, ctypes.c_double: 3}
SCALAR_KINDS = {int: INT_SCALAR, bool: BOOL_SCALAR, float: FLOAT_SCALAR}


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
        ("slot", ctypes.c_int32),
        ("map_slot", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("align", ctypes.c_int64),
        ("expect_i", ctypes.c_int64),
        ("expect_f", ctypes.c_double),
        ("map_ptr", ctypes.c_uint64 * MAPS),
        ("map_addr", ctypes.c_uint64 * MAPS),
    ]


class Plan(ctypes.Structure):
    """``TilePlan`` of native_launch.cc: the launch, with its argument specs."""

    _fields_ = [
        ("nargs", ctypes.c_int32),
        ("ninputs", ctypes.c_int32),
        ("nparams", ctypes.c_int32),
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
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("constants", ctypes.c_void_p),
    ]


class Table(ctypes.Structure):
    """``TileTable`` of native_launch.cc: the plans of one binding."""

    _fields_ = [
        ("count", ctypes.c_int32),
        ("last", ctypes.c_int32),
        ("plans", ctypes.POINTER(Plan) * MAX_PLANS),
    ]


LAYOUT = ",".join(
    str(v) for v in (ctypes.sizeof(Table), ctypes.sizeof(Plan), ctypes.sizeof(ArgSpec), MAX_DIMS, MAX_PARAMS,
                     MAPS, MAX_PLANS, MAX_OUTPUTS)
)  # fmt: skip
"""What ``tile_gpu_layout`` must answer for the ctypes mirror above to be the C++ structs."""


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
def _library() -> dict[str, Any] | None:
    """The built library's functions by name, or None (no compiler, a failed build, a layout
    mismatch, or ``TILE_NATIVE_LAUNCH=0``). Built once per source, compiler and tvm-ffi version.
    (Each lookup in a tvm-ffi module makes a new function object, with its own ``release_gil``.)"""
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
        if str(module["tile_gpu_layout"]()) != LAYOUT:
            return None  # the ctypes mirror and the C++ structs disagree: never call it
        functions = {name: module[name] for name in ("tile_gpu_call", "tile_gpu_take", "tile_gpu_env_stream")}
        functions["tile_gpu_call"].release_gil = False  # see the module docstring
        functions["tile_gpu_take"].release_gil = False
    except Exception:
        return None
    return functions


def native_call_function() -> Callable[..., Any] | None:
    """``tile_gpu_call`` of the built library, or None where it did not build."""
    functions = _library()
    return None if functions is None else functions["tile_gpu_call"]


def native_take_function() -> Callable[..., Any] | None:
    """``tile_gpu_take(anchor)`` of the built library: the next output of this thread's last
    ``tile_gpu_call`` after its first (``anchor``: a torch tensor, so the output comes back as
    one), or None where it did not build."""
    functions = _library()
    return None if functions is None else functions["tile_gpu_take"]


_FOLLOWS_TORCH: dict[tuple[str, int], bool] = {}


def follows_torch(device: Any, current_stream: Callable[[int], int]) -> bool:
    """Whether a native call with tensors on ``device`` (a torch device) allocates from an
    allocator tvm-ffi installs (torch's) and launches on the stream ``current_stream(index)``
    answers: tvm-ffi installs both from torch for a call with torch tensors, where torch
    exports them (``__dlpack_c_exchange_api__``). For a GPU, checked once per device with a
    side stream current (so a default stream both answer cannot pass for agreement); never
    while a CUDA graph is being captured (False: that plan stays on the Python path)."""
    functions = _library()
    if functions is None:
        return False
    import torch

    index = device.index or 0
    probe = torch.empty(0, device=device)

    def agree(expected: int | None = None) -> bool:
        try:
            seen = int(functions["tile_gpu_env_stream"](probe))
        except Exception:  # no allocator installed: the outputs would not be torch's
            return False
        return seen == int(current_stream(index)) and expected in (None, seen)

    if device.type == "cpu":  # host-side tests: the driver's stream is whatever the test installs
        return agree()
    key = (device.type, index)
    if key not in _FOLLOWS_TORCH:
        if torch.cuda.is_current_stream_capturing():
            return False
        side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        with torch.cuda.stream(side):
            _FOLLOWS_TORCH[key] = agree(int(side.cuda_stream))
    return _FOLLOWS_TORCH[key]


@functools.cache
def dl_type(dtype: Any, device: Any) -> tuple[int, int, int, int, int] | None:
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


@dataclasses.dataclass
class Argument:
    """One kernel-call argument (inputs and outputs, in parameter order) as the native call sees it.

    ``signature``: the launcher's key entry, ``(dtype, shape, device, contiguous)`` for a
    tensor or a scalar's type; ``output``: allocated by the call; ``slot``: the kernel
    parameter its pointer or value goes into (-1: none); ``holder``: that parameter's ctypes
    type for a scalar; ``map_slot``: the by-value parameter (a TMA map) encoded from its
    pointer (-1: none); ``value``: a scalar the launch dims read, which the call must repeat.
    """

    signature: Any
    output: bool = False
    slot: int = -1
    holder: Any = None
    map_slot: int = -1
    value: Any = None


@dataclasses.dataclass(frozen=True)
class Launch:
    """The vendor side of a plan: the loaded function, the launch and scope functions (C
    addresses), the scope (what ``query`` writes for the device: a context or an index), grid,
    block, dynamic shared bytes and the Python plan's parameter array (``constants``, ``nparams``)."""

    function: int
    launch: int
    query: int
    select: int
    scope: int
    scope_bytes: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    constants: int
    nparams: int


class NativePlan:
    """One argument signature's plan for ``tile_gpu_call``, with what keeps it alive."""

    def __init__(self, specs: Sequence[ArgSpec], plan: Plan, keep: Any) -> None:
        self.specs = (ArgSpec * len(specs))(*specs)
        plan.args = ctypes.cast(self.specs, ctypes.POINTER(ArgSpec))
        self.plan = plan
        self.keep = keep
        self.maps: list[list[Any]] = [[None] * MAPS for _ in specs]  # what keeps each map alive
        self._next = [0] * len(specs)

    def remember_map(self, position: int, pointer: int, address: int, owner: Any) -> None:
        """The TMA map at ``address`` (kept alive by ``owner``) was encoded for ``pointer``, the
        data pointer of the argument at ``position``: later calls with that pointer launch
        natively. Written so that a call between any two of these statements sees a consistent
        (pointer, map) pair or none (see the module docstring)."""
        spec = self.specs[position]
        if spec.map_slot < 0 or pointer == 0 or pointer in spec.map_ptr:
            return
        k = self._next[position]
        self._next[position] = (k + 1) % MAPS
        spec.map_ptr[k] = 0
        spec.map_addr[k] = address
        self.maps[position][k] = owner
        spec.map_ptr[k] = pointer

    @classmethod
    def build(
        cls, arguments: Sequence[Argument], launch: Launch, align: int, keep: Any = None
    ) -> NativePlan | None:
        """The plan, or None where the call is of a kind the native call does not handle: more
        than ``MAX_OUTPUTS`` outputs, an output passed through a by-value map (a fresh output's
        map would have to be encoded per call), no input tensor (tvm-ffi installs torch's stream
        and allocator only for a call with one), a scalar of another C type, too many dims or
        parameters."""
        outputs = sum(a.output for a in arguments)
        if outputs > MAX_OUTPUTS or launch.nparams > MAX_PARAMS:
            return None
        specs, device = [], None
        for argument in arguments:
            spec = ArgSpec()
            spec.align, spec.slot, spec.map_slot = align, argument.slot, argument.map_slot
            entry = argument.signature
            if isinstance(entry, tuple) and len(entry) == 4:
                dtype, shape, where, contiguous = entry
                dl = dl_type(dtype, where)
                if dl is None or not contiguous or len(shape) > MAX_DIMS or argument.holder is not None:
                    return None
                if argument.output and argument.map_slot >= 0:
                    return None
                spec.dtype_code, spec.dtype_bits, spec.dtype_lanes, spec.device_type, spec.device_id = dl
                spec.ndim = len(shape)
                for k, d in enumerate(shape):
                    spec.shape[k] = int(d)
                spec.kind = OUTPUT if argument.output else TENSOR
                if not argument.output:
                    device = dl[3:]
            elif entry in SCALAR_KINDS and not argument.output and argument.map_slot < 0:
                spec.kind = SCALAR_KINDS[entry]
                code = HOLDER_CODES.get(argument.holder) if argument.slot >= 0 else 0
                if code is None:
                    return None
                spec.holder_code = code
                if argument.value is not None:
                    spec.valued = 1
                    if entry is float:
                        spec.expect_f = float(argument.value)
                    else:
                        spec.expect_i = int(argument.value)
            else:
                return None
            specs.append(spec)
        if device is None:
            return None
        plan = Plan()
        plan.nargs, plan.ninputs = len(specs), len(specs) - outputs
        plan.nparams, plan.constants = launch.nparams, launch.constants
        plan.function, plan.launch = launch.function, launch.launch
        plan.query, plan.select = launch.query, launch.select
        plan.scope_bytes = launch.scope_bytes
        plan.scope = launch.scope & ((1 << (8 * launch.scope_bytes)) - 1)
        plan.grid[:], plan.block[:], plan.shared = launch.grid, launch.block, launch.shared
        plan.device_type, plan.device_id = device
        return cls(specs, plan, keep)


class NativeTable:
    """The plans of one kernel binding, for ``tile_gpu_call(table.address, *inputs)``."""

    def __init__(self) -> None:
        self.table = Table()
        self.table.last = -1
        self.address = ctypes.addressof(self.table)
        self.plans: list[NativePlan] = []
        self.owners: list[Any] = []
        """Per plan, what the caller gave with it (the launcher's plan, for an error message)."""

    def add(self, plan: NativePlan | None, owner: Any = None) -> bool:
        """Make ``plan`` found by later calls; False when there is none or the table is full."""
        if plan is None or len(self.plans) >= MAX_PLANS:
            return False
        index = len(self.plans)
        self.plans.append(plan)
        self.owners.append(owner)
        self.table.plans[index] = ctypes.pointer(plan.plan)
        self.table.count = index + 1  # after the pointer: a call never sees an empty entry
        return True

    def last(self) -> Any:
        """The owner given with the plan the last call matched (or whose launch failed)."""
        index = self.table.last
        return self.owners[index] if 0 <= index < len(self.owners) else None


def function_address(fn: Any) -> int:
    """The C address of a ctypes function object."""
    return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)


__all__ = [
    "MISS",
    "Argument",
    "Launch",
    "NativePlan",
    "NativeTable",
    "dl_type",
    "follows_torch",
    "function_address",
    "native_call_function",
    "native_take_function",
]
