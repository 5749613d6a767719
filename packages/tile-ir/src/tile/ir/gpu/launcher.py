"""The launch path every GPU runtime shares: a plan built once, one cheap check per call.

A vendor runtime (CUDA's driver API, HIP's module API) supplies a :class:`GpuDriver`: how
to load the kernel's machine code on a device, how to launch it, what its errors are
called. :class:`GpuLauncher` does everything else, the same for every vendor:

* The first call with an argument *signature* (per argument: dtype, shape, device and
  contiguity of a tensor, the type of a scalar) runs the full checks
  (:func:`~tile.ir.gpu.launch.check_torch_arguments`) and builds a :class:`_Plan`: the
  device's loaded function (module, context and shared-memory attribute resolved once per
  device), the grid, block and dynamic shared memory (from closures compiled once per
  kernel, see :func:`~tile.ir.gpu.launch.compile_launch_dims`), and the kernel-parameter
  array with one preallocated ctypes holder per parameter.
* Every later call with that signature looks the plan up by the signature and only writes
  the data pointers (and scalars) into the holders, asks torch for the current stream of
  the tensors' device and launches. Nothing per call synchronizes, allocates outside torch
  or probes the driver, so a call is legal under CUDA-graph capture.
* ``bind_call`` gives ``tile.lang``'s ``JITKernel`` that fast path with its ``out_idx``
  outputs from torch's caching allocator on the tensors' device (``new_empty`` of an input,
  ``torch.empty`` where no input is a tensor).
* Where the driver is C functions and the host has a C++ compiler, each plan also goes into
  the binding's :class:`~tile.ir.gpu.native_launch.NativeTable`, and a bound call is one C++
  call through apache-tvm-ffi (:mod:`~tile.ir.gpu.native_launch`): it finds the plan, takes
  the output from torch's allocator and launches on torch's current stream, with no Python in
  between; what it does not describe (a new signature, a TMA map to encode) comes back here.

A driver's failure becomes the vendor's typed launch error, naming the kernel and the
line of the user's kernel (``location``).

Example (a recording driver instead of a GPU; ``tile.ir.gpu.testing``)::

    from tile.ir.gpu.testing import RecordingDriver
    launcher = MyLauncher(image, recipe, params, driver=RecordingDriver())
    launcher(x, y)      # full checks, a plan for this signature, one launch
    launcher(x2, y2)    # same signature: the plan is reused
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ..errors import SourceLocation
from .launch import (
    SCALAR_CTYPES,
    KernelLauncher,
    KernelParam,
    LaunchRecipe,
    ParamSpecs,
    ParamStrides,
    check_torch_arguments,
    compile_launch_dims,
    launch_dim_names,
)
from .native_launch import (
    Argument,
    Launch,
    NativePlan,
    NativeTable,
    follows_torch,
    function_address,
    native_call_function,
    native_take_function,
)

PLAN_LIMIT = 256
"""Plans kept per kernel (argument signatures); past it the oldest is dropped."""


class DeviceFunction:
    """A kernel loaded on one device: what :meth:`GpuDriver.load` returns."""

    def set_dynamic_shared(self, nbytes: int) -> None:
        """Allow launches with ``nbytes`` of dynamic shared memory (called once per plan)."""

    def launch(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, stream: int, params: int
    ) -> int:
        """Launch on ``stream`` with the kernel-parameter array at address ``params``; the
        driver's status (0: success)."""
        raise NotImplementedError(f"{type(self).__name__} must launch")

    def bind(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, params: int
    ) -> Callable[[int], int]:
        """The launch of one plan as a function of the stream alone (built once per plan)."""
        return lambda stream: self.launch(grid, block, shared, stream, params)


def unprototyped(lib: Any, name: str) -> Any:
    """A second ctypes function object for ``lib``'s ``name`` without argument types, or None
    (``lib`` is not a ctypes library). Called with ctypes objects only, it converts nothing:
    the cheapest call ctypes makes."""
    make = getattr(lib, "_FuncPtr", None)
    if make is None:
        return None
    fn = make((name, lib))
    fn.restype = ctypes.c_int
    return fn


class ScopedFunction(DeviceFunction):
    """A kernel launched inside its device's per-thread scope: CUDA's current context, HIP's
    current device. A launch from a thread whose scope is another device's selects this one
    for the launch and puts the caller's back after, so torch's notion of the current device
    never changes under it; in the common case the scope is already right and a launch is one
    query and the vendor's launch call.

    A vendor names its three calls in ``symbols``: the query that writes the thread's scope
    into a ctypes ``scope_type`` value (``cuCtxGetCurrent``, ``hipGetDevice``), the call that
    sets it, and the launch ``(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
    -> status``; they are looked up in ``lib`` with their prototypes, and once more without
    (:func:`unprototyped`) for :meth:`bind`, which calls them with ctypes values built once per
    plan.
    """

    symbols: ClassVar[tuple[str, str, str]]
    scope_type: ClassVar[Any] = ctypes.c_void_p

    def __init__(self, lib: Any, scope: Any, function: int) -> None:
        query, select, launch = self.symbols
        self.lib = lib
        self.scope = scope
        self.function = function
        self.query = getattr(lib, query)
        self.select = getattr(lib, select)
        self.launch_kernel = getattr(lib, launch)
        self.raw_query, self.raw_launch = unprototyped(lib, query), unprototyped(lib, launch)
        self._current = self.scope_type()
        self._current_ref = ctypes.byref(self._current)

    def bind(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, params: int
    ) -> Callable[[int], int]:
        query, launch_kernel = self.raw_query, self.raw_launch
        if query is None or launch_kernel is None:
            return super().bind(grid, block, shared, params)
        head = (ctypes.c_void_p(self.function), *[ctypes.c_uint(v) for v in (*grid, *block, shared)])
        stream, tail = ctypes.c_void_p(0), ctypes.c_void_p(params)
        current, ref, scope, select = self._current, self._current_ref, self.scope, self.select

        def launch(handle: int) -> int:  # the launcher's lock is held: one caller at a time
            stream.value = handle
            query(ref)
            previous = current.value
            if previous == scope:
                return int(launch_kernel(*head, stream, tail, None))
            select(scope)
            try:
                return int(launch_kernel(*head, stream, tail, None))
            finally:
                select(previous)

        return launch

    def launch(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, stream: int, params: int
    ) -> int:
        self.query(self._current_ref)
        previous = self._current.value
        if previous == self.scope:
            return int(self.launch_kernel(self.function, *grid, *block, shared, stream, params, None))
        self.select(self.scope)
        try:
            return int(self.launch_kernel(self.function, *grid, *block, shared, stream, params, None))
        finally:
            self.select(previous)


def set_prototypes(lib: Any, prototypes: dict[str, list[Any]]) -> Any:
    """Give each of ``lib``'s functions named in ``prototypes`` its ctypes argument types and an
    ``int`` status result, once (a ctypes call then converts nothing it need not)."""
    for name, argtypes in prototypes.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    return lib


class GpuDriver:
    """What a vendor runtime gives :class:`GpuLauncher`.

    ``device_type`` is the torch device type of the tensors it runs on (``"cuda"`` for
    NVIDIA and for torch's ROCm build). The default ``current_stream`` asks torch for the
    raw handle of the current stream of a device, without building a ``torch.cuda.Stream``.
    """

    vendor: ClassVar[str] = "GPU"
    device_type: str = "cuda"

    def load(self, image: bytes, kernel_name: str, device: int, **options: Any) -> DeviceFunction:
        """Load ``image`` on ``device`` and find ``kernel_name`` in it (once per device)."""
        raise NotImplementedError(f"{type(self).__name__} must load kernels")

    def error_text(self, status: int) -> str:
        """The driver's name for a status code."""
        return str(status)

    _stream_query: Callable[[int], int] | None = None

    def current_stream(self, device: int) -> int:
        query = self._stream_query
        if query is None:  # resolved on the first launch (torch is imported by then), once
            query = self._stream_query = torch_stream_query()
        return query(device)


def torch_stream_query() -> Callable[[int], int]:
    """``device -> raw handle of torch.cuda.current_stream(device)`` (a ``CUstream`` or
    ``hipStream_t``): torch's accessor of the raw handle where it has one (no Stream object)."""
    torch = sys.modules["torch"]
    raw: Callable[[int], int] | None = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: int(torch.cuda.current_stream(device).cuda_stream)


def torch_current_stream(device: int) -> int:
    """The raw handle of ``torch.cuda.current_stream(device)``, asked afresh."""
    return int(torch_stream_query()(device))


Packer = Callable[[int, tuple[int, ...], tuple[int, ...]], tuple[Any, int]]
"""A vendor's by-value parameter (CUDA's tensor map): ``(data pointer, shape, strides) -> (owner,
address)``: the bytes to pass are at ``address``, alive as long as ``owner`` is."""


class _Plan:
    """Everything a launch with one argument signature needs, built on its first call."""

    __slots__ = (
        "address",
        "array",
        "block",
        "by_value",
        "device",
        "empty",
        "feeds",
        "function",
        "grid",
        "holders",
        "launch",
        "natives",
        "pointers",
        "scalars",
        "shared",
    )  # fmt: skip

    def __init__(self) -> None:
        self.device = 0
        self.function: DeviceFunction = DeviceFunction()
        self.grid: tuple[int, int, int] = (0, 0, 0)
        self.block: tuple[int, int, int] = (0, 0, 0)
        self.shared = 0
        self.array: Any = None  # void*[n]: the kernel-parameter array cuLaunchKernel reads
        self.address = 0
        self.pointers: list[tuple[int, Any]] = []  # (argument position, c_void_p holder)
        self.scalars: list[tuple[int, Any]] = []  # (argument position, ctypes holder)
        # [argument position, array slot, packer, shape, strides, the pointer packed last]
        self.by_value: list[list[Any]] = []
        self.holders: list[Any] = []  # every value the array points at, kept alive with it
        # per kernel parameter: (argument position or -1, "pointer" | "scalar" | "constant" | "by_value")
        self.feeds: list[tuple[int, str]] = []
        self.natives: list[NativePlan] = []  # its native twins: told of every map packed
        self.launch: Callable[[int], int] = lambda stream: 0  # the launch, given the stream
        self.empty = False  # a grid dim of 0: nothing to launch


def _signature(value: Any, tensor_type: Any) -> Any:
    if isinstance(value, tensor_type):
        return (value.dtype, value.shape, value.device, value.is_contiguous())
    return type(value)


def _with_strides(signature: Any, value: Any) -> Any:
    """A ``T.StridedTensor`` argument's signature: its strides too (the plan fixes the symbolic
    strides the kernel takes as scalars, and a TMA map's strides)."""
    if isinstance(signature, tuple):
        return (*signature, tuple(value.stride()))
    return signature


def _row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= max(int(dim), 1)
    return tuple(reversed(strides))


class GpuLauncher(KernelLauncher):
    """A built kernel launched through a :class:`GpuDriver`; call it with every parameter in order.

    Subclasses say how the driver is opened (``open_driver``, raising the vendor's
    device-unavailable error) and how the image is loaded (``load_function``); they may add
    by-value parameter kinds (``by_value_packer``).
    """

    device_type: str = "cuda"
    vendor: ClassVar[str] = "GPU"
    tensor_hint: ClassVar[str] = "pass a torch tensor on the GPU"
    scalars_must_be_numbers: ClassVar[bool] = False

    def __init__(
        self,
        recipe: LaunchRecipe,
        params: ParamSpecs,
        location: SourceLocation | None = None,
        driver: GpuDriver | None = None,
        strides: ParamStrides | None = None,
    ) -> None:
        super().__init__(recipe, params, location, strides)
        self._driver = driver
        if driver is not None:
            self.device_type = driver.device_type
        self._dims = compile_launch_dims(recipe, self._fail)
        # scalars the launch dims or a tensor's shape read: their values are part of the signature
        shape_names = {d for _, _, shape in self.params if shape for d in shape if isinstance(d, str)}
        keyed = launch_dim_names(recipe) | shape_names
        self._valued = tuple(
            i for i, (name, _, shape) in enumerate(self.params) if shape is None and name in keyed
        )
        # T.StridedTensor parameters: their strides are part of the signature
        self._strided = tuple(i for i, (name, _, _) in enumerate(self.params) if name in self.strides)
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        self._functions: dict[int, DeviceFunction] = {}
        self._bindings: list[_Binding] = []
        self._lock = threading.Lock()  # one launch at a time fills the shared parameter holders

    # ------------------------------------------------------------------ vendor hooks
    def open_driver(self) -> GpuDriver:
        """The vendor's driver; raises the vendor's device-unavailable error when there is none."""
        raise NotImplementedError(f"{type(self).__name__} must open its driver")

    def load_function(self, driver: GpuDriver, device: int) -> DeviceFunction:
        """Load the kernel on ``device`` (called once per device)."""
        raise NotImplementedError(f"{type(self).__name__} must load its image")

    def by_value_packer(self, param: KernelParam, driver: GpuDriver) -> Packer:
        """The packer of a vendor-specific parameter kind (CUDA's ``tensormap``)."""
        raise self._fail(f"unknown kernel parameter kind {param.kind!r}", "rebuild the kernel")

    # ------------------------------------------------------------------ checks
    def driver(self) -> GpuDriver:
        if self._driver is None:
            self._driver = self.open_driver()
        return self._driver

    def check_arguments(self, args: Sequence[Any]) -> tuple[dict[str, int], int]:
        """Check every argument; returns the symbolic-dim/scalar values and the device index."""
        return check_torch_arguments(
            self.params, args, self._fail, self.vendor, self.tensor_hint,
            scalars_must_be_numbers=self.scalars_must_be_numbers, device_type=self.device_type,
            strides=self.strides,
        )  # fmt: skip

    def _key(self, args: Sequence[Any], tensor_type: Any) -> tuple[Any, ...]:
        key = [_signature(a, tensor_type) for a in args]
        for i in self._strided:
            key[i] = _with_strides(key[i], args[i])
        for i in self._valued:
            key[i] = (key[i], args[i])
        return tuple(key)

    # ------------------------------------------------------------------ launching
    def __call__(self, *args: Any) -> None:
        """Check every argument (once per signature), then launch on torch's current stream."""
        driver = self.driver()
        torch = sys.modules.get("torch")
        key = self._key(args, torch.Tensor) if torch is not None and len(args) == len(self.params) else None
        try:
            plan = self._plans.get(key) if key is not None else None
        except TypeError:  # an unhashable scalar argument: the checks name it
            plan = None
        if plan is None:
            names, device = self.check_arguments(args)  # passed: torch tensors for every tensor parameter
            plan = self._plan(driver, args, names, device)
            self._remember(self._key(args, sys.modules["torch"].Tensor), plan)
        self._launch(driver, plan, args)

    def _function(self, driver: GpuDriver, device: int) -> DeviceFunction:
        with self._lock:
            found = self._functions.get(device)
            if found is None:
                found = self._functions[device] = self.load_function(driver, device)
            return found

    def _plan(self, driver: GpuDriver, args: Sequence[Any], names: dict[str, int], device: int) -> _Plan:
        plan = _Plan()
        plan.device = device
        plan.function = self._function(driver, device)
        values = self._dims(names)
        plan.grid = (values[0], values[1], values[2])
        plan.block = (values[3], values[4], values[5])
        plan.shared = values[6]
        plan.empty = min(plan.grid) <= 0
        if not plan.empty:
            plan.function.set_dynamic_shared(plan.shared)
        position = {name: i for i, (name, _, _) in enumerate(self.params)}
        holders: list[Any] = []
        for param in self.recipe.params:
            pos = position.get(param.source, -1)
            if param.kind == "tensor":
                holder = ctypes.c_void_p(0)
                plan.pointers.append((pos, holder))
                plan.feeds.append((pos, "pointer"))
            elif param.kind == "scalar":
                holder = SCALAR_CTYPES.get(param.dtype, ctypes.c_int32)()
                if pos >= 0 and self.params[pos][2] is None:
                    plan.scalars.append((pos, holder))  # a scalar argument: written per call
                    plan.feeds.append((pos, "scalar"))
                else:
                    plan.feeds.append((-1, "constant"))
                    raw = names.get(param.source)
                    if raw is None:
                        raise self._fail(
                            f"no value for the kernel parameter {param.source}", "pass every scalar"
                        )
                    holder.value = raw  # a symbolic dim: fixed by the signature
            else:
                shape = tuple(int(d) for d in args[pos].shape)
                packer = self.by_value_packer(param, driver)
                # a T.StridedTensor's map has its own strides (the signature fixes them)
                steps = tuple(args[pos].stride()) if pos in self._strided else _row_major_strides(shape)
                plan.by_value.append([pos, len(holders), packer, shape, steps, None])
                plan.feeds.append((pos, "by_value"))
                holder = None  # the packed value's owner, once packed
            holders.append(holder)
        plan.array = (ctypes.c_void_p * max(len(holders), 1))(
            *[ctypes.addressof(h) if h is not None else 0 for h in holders]
        )
        plan.address = ctypes.addressof(plan.array)
        plan.holders = holders
        plan.launch = plan.function.bind(plan.grid, plan.block, plan.shared, plan.address)
        return plan

    def _remember(self, key: tuple[Any, ...], plan: _Plan) -> None:
        with self._lock:
            if len(self._plans) >= PLAN_LIMIT:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
            for binding in self._bindings:
                binding.learn(key, plan)

    def _launch(self, driver: GpuDriver, plan: _Plan, args: Sequence[Any], align: int = 1) -> bool:
        """Fill the plan's holders from ``args`` and launch; False (nothing launched) when a
        tensor's address is not a multiple of ``align``."""
        if plan.empty:
            return True  # an empty problem: nothing to launch
        with self._lock:
            for pos, holder in plan.pointers:
                ptr = args[pos].data_ptr()
                if ptr % align and args[pos].numel():
                    return False
                holder.value = ptr
            for pos, holder in plan.scalars:
                value = args[pos]  # a T.ptr argument comes as tile.lang's c_void_p
                holder.value = value.value if isinstance(value, ctypes.c_void_p) else value
            for packed in plan.by_value:
                ptr = args[packed[0]].data_ptr()
                if ptr % align and args[packed[0]].numel():
                    return False
                if ptr != packed[5]:  # the plan fixes shape and strides: a new pointer, a new value
                    owner, address = packed[2](ptr, packed[3], packed[4])
                    plan.array[packed[1]], plan.holders[packed[1]], packed[5] = address, owner, ptr
                    for native in plan.natives:  # the next call with this pointer launches natively
                        native.remember_map(packed[0], ptr, address, owner)
            status = plan.launch(driver.current_stream(plan.device))
        if status != 0:
            raise self._launch_failed(driver, plan, status)
        return True

    def _launch_failed(self, driver: GpuDriver, plan: _Plan, status: int) -> Exception:
        return self._fail(
            f"the launch failed with {driver.error_text(status)} (grid {plan.grid}, block {plan.block}, "
            f"{plan.shared} bytes of dynamic shared memory)",
            "check the device and the driver version; a launch that exceeds the device's limits "
            "needs smaller tiles or fewer threads",
        )

    # ------------------------------------------------------------------ tile.lang's fast path
    def bind_call(
        self, out_idx: Sequence[int], location: SourceLocation | None, alignment: int, miss: Any
    ) -> Callable[[tuple[Any, ...]], Any]:
        """``JITKernel``'s call for argument signatures seen before: inputs in, outputs
        (``out_idx``, from torch's allocator on the inputs' device) out; ``miss`` for anything
        else (or a tensor off ``alignment``), which ``JITKernel`` then checks fully and passes
        here through ``__call__``."""
        if location is not None and self.location is None:
            self.location = location
        binding = _Binding(self, list(out_idx), alignment, miss)
        with self._lock:
            self._bindings.append(binding)
            for key, plan in self._plans.items():
                binding.learn(key, plan)
        return binding.call


class _Binding:
    """Plans by the signature of a call's inputs (the outputs left out), for ``bind_call``."""

    def __init__(self, launcher: GpuLauncher, out_idx: list[int], alignment: int, miss: Any) -> None:
        self.launcher = launcher
        count = len(launcher.params)
        self.out_idx = sorted(i % count for i in out_idx)
        self.inputs = [i for i in range(count) if i not in self.out_idx]
        self.alignment = alignment
        self.miss = miss
        self.plans: dict[tuple[Any, ...], _BoundPlan] = {}
        self.count = len(self.inputs)
        self.trailing = self.out_idx == list(range(self.count, count))  # outputs after every input
        valued, strided = set(launcher._valued), set(launcher._strided)
        self._valued = [k for k, i in enumerate(self.inputs) if i in valued]
        self._strided = [k for k, i in enumerate(self.inputs) if i in strided]
        self._tensor: Any = None
        self.last: _BoundPlan | None = None
        """The plan of the last call on the Python path: the next is checked against it first."""
        self.table = NativeTable()
        """The plans the native call finds (``native_launch``)."""
        self.native: Callable[..., Any] | None = None
        """``tile_gpu_call`` once a plan takes the native path (looked up then: only a driver of
        C functions builds the library); None: every call takes the Python path."""
        self.take: Callable[..., Any] = lambda anchor: None
        """``tile_gpu_take``: a native call's outputs after the first."""
        self.extra = len(self.out_idx) - 1
        tensors = [k for k, i in enumerate(self.inputs) if launcher.params[i][2] is not None]
        self.anchor = tensors[0] if tensors else -1
        """An input that is always a tensor (the native path needs one): ``take``'s anchor."""

    def learn(self, key: tuple[Any, ...], plan: _Plan) -> None:
        """Index ``plan`` (found for ``key``, the signature of every argument) by its inputs'."""
        outputs = []
        for index in self.out_idx:
            sig = key[index]
            if not isinstance(sig, tuple) or len(sig) != 4 or not sig[3]:
                return  # an output that torch.empty would not make (non-contiguous): no fast path
            dtype, shape, device, _ = sig
            outputs.append((index, tuple(shape), dtype, device))
        if len(self.plans) >= PLAN_LIMIT:
            self.plans.pop(next(iter(self.plans)))
        inputs = tuple(key[i] for i in self.inputs)
        like = next((k for k, sig in enumerate(inputs) if isinstance(sig, tuple) and len(sig) >= 4), -1)
        bound = _BoundPlan(plan, outputs, self.launcher.driver(), like)
        bound.matches = _signature_guard(inputs, self._valued, sys.modules["torch"].Tensor, self._strided)
        bound.native = self._native_plan(key, plan, bound)
        self.plans[inputs] = bound

    def _native_plan(self, key: tuple[Any, ...], plan: _Plan, bound: _BoundPlan) -> NativePlan | None:
        """``plan`` made findable by the native call (``native_launch``), or None where it does
        not apply: no native library, an empty grid, a driver that is not C functions, a
        signature the native call does not check."""
        function = plan.function
        if plan.empty or not isinstance(function, ScopedFunction) or function.raw_launch is None:
            return None
        call, take = native_call_function(), native_take_function()
        if call is None or take is None or self.anchor < 0 or self._strided:
            return None  # (the native call checks row-major tensors: strided ones take the Python path)
        arguments = [Argument(sig, output=i in self.out_idx) for i, sig in enumerate(key)]
        for i in self.launcher._valued:
            arguments[i].signature, arguments[i].value = key[i]
        for slot, (pos, feed) in enumerate(plan.feeds):
            if pos < 0:
                continue  # a constant: the native call reads it from the plan's parameter array
            argument = arguments[pos]
            if feed == "by_value":
                if argument.map_slot >= 0:
                    return None  # two maps of one tensor: left to the Python path
                argument.map_slot = slot
            elif argument.slot >= 0:
                return None  # one argument in two parameters: left to the Python path
            else:
                argument.slot = slot
                argument.holder = type(plan.holders[slot]) if feed == "scalar" else None
        launch = Launch(
            function.function, function_address(function.launch_kernel), function_address(function.query),
            function_address(function.select), int(function.scope or 0), ctypes.sizeof(function.scope_type),
            plan.grid, plan.block, plan.shared, plan.address, len(plan.feeds),
        )  # fmt: skip
        native = NativePlan.build(arguments, launch, self.alignment, keep=plan)
        if native is None:
            return None
        device = next(a.signature[2] for a in arguments if not a.output and isinstance(a.signature, tuple))
        if not follows_torch(device, bound.driver.current_stream) or not self.table.add(native, bound):
            return None
        for packed in plan.by_value:  # maps packed before (learn runs under the launcher's lock)
            if packed[5]:
                native.remember_map(packed[0], packed[5], plan.array[packed[1]] or 0, plan.holders[packed[1]])
        plan.natives.append(native)
        self.native, self.take = call, take
        return native

    def call(self, args: tuple[Any, ...]) -> Any:
        native = self.native
        if native is not None:
            # the native path: one C call finds the plan, allocates the output and launches
            try:
                result = native(self.table.address, *args)
            except Exception:  # an argument tvm-ffi does not take, an allocation that failed:
                return self._call_python(args)  # the Python path checks and names it
            if result.__class__ is not int:  # launched: the output (None for a kernel without one)
                if self.extra > 0:  # and the others, in order
                    anchor, take = args[self.anchor], self.take
                    return (result, *[take(anchor) for _ in range(self.extra)])
                return result
            if result < 0:
                failed: _BoundPlan = self.table.last()
                raise self.launcher._launch_failed(failed.driver, failed.plan, -result)
        return self._call_python(args)  # no plan for this signature, or a map to encode: nothing ran

    def _call_python(self, args: tuple[Any, ...]) -> Any:
        bound = self.last
        if bound is None or not bound.matches(args):  # not the last call's signature: look it up
            bound = self._lookup(args)
            if bound is None:
                return self.miss
            self.last = bound
        outs, full = self._outputs(bound, args)
        result = outs[0] if len(outs) == 1 else (outs or None)
        if not self.launcher._launch(bound.driver, bound.plan, full, self.alignment):
            return self.miss  # an unaligned tensor: JITKernel stages it
        return result

    def _outputs(self, bound: _BoundPlan, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any]:
        """The call's outputs, from torch's allocator on the inputs' device (``new_empty``:
        ``torch.empty`` without parsing a device argument), and every argument in order."""
        like = args[bound.like] if bound.like >= 0 else None
        if like is not None and len(bound.outputs) == 1:  # the common case, without a generator
            outs: tuple[Any, ...] = (like.new_empty(bound.outputs[0][1], dtype=bound.outputs[0][2]),)
        else:
            outs = tuple(
                like.new_empty(shape, dtype=dtype)
                if like is not None
                else bound.empty(shape, dtype=dtype, device=device)
                for _, shape, dtype, device in bound.outputs
            )
        if self.trailing:
            return outs, args + outs
        full = list(args)
        for (index, _, _, _), out in zip(bound.outputs, outs, strict=True):
            full.insert(index, out)
        return outs, full

    def _lookup(self, args: tuple[Any, ...]) -> _BoundPlan | None:
        """The plan for ``args``' signature (hashed), or None."""
        if len(args) != self.count:
            return None
        tensor = self._tensor
        if tensor is None:
            torch = sys.modules.get("torch")
            if torch is None:
                return None
            tensor = self._tensor = torch.Tensor
        key: list[Any] = [
            (a.dtype, a.shape, a.device, a.is_contiguous()) if isinstance(a, tensor) else type(a)
            for a in args
        ]
        for k in self._strided:
            key[k] = _with_strides(key[k], args[k])
        for k in self._valued:
            key[k] = (key[k], args[k])
        try:
            return self.plans.get(tuple(key))
        except TypeError:  # an unhashable argument
            return None


def _signature_guard(
    inputs: tuple[Any, ...], valued: Sequence[int], tensor_type: Any, strided: Sequence[int] = ()
) -> Callable[[tuple[Any, ...]], bool]:
    """A function telling whether a call's arguments have the signature ``inputs`` (as
    ``_Binding._lookup`` keys them), comparing each field in place: the back-to-back call
    with the same signature as the last one is checked without building or hashing a key.
    Tensors of a subclass, or arguments of another type, are left to the lookup."""
    names = [f"a{i}" for i in range(len(inputs))]
    constants: dict[str, Any] = {"T": tensor_type}
    tests = [f"len(args) == {len(inputs)}"]
    for i, sig in enumerate(inputs):
        a = names[i]
        if i in valued:
            sig, constants[f"v{i}"] = sig
            tests.append(f"{a} == v{i}")
        if isinstance(sig, tuple) and len(sig) == 4 + (i in strided):
            constants.update({f"d{i}": sig[0], f"s{i}": sig[1], f"g{i}": sig[2]})
            tests.append(
                f"type({a}) is T and {a}.dtype is d{i} and {a}.shape == s{i} and {a}.device == g{i}"
                f" and {a}.is_contiguous() is {bool(sig[3])}"
            )
            if i in strided:
                constants[f"st{i}"] = sig[4]
                tests.append(f"{a}.stride() == st{i}")
        else:
            constants[f"t{i}"] = sig
            tests.insert(len(tests) - (i in valued), f"type({a}) is t{i}")
    unpack = f"    {', '.join(names)}, = args\n" if names else ""
    body = " and ".join(tests[1:]) or "True"
    source = (
        "def matches(args):\n"
        f"    if not ({tests[0]}):\n        return False\n{unpack}    return bool({body})\n"
    )
    namespace: dict[str, Any] = dict(constants)
    exec(compile(source, "<tile signature guard>", "exec"), namespace)  # our own text, built above
    return namespace["matches"]  # type: ignore[no-any-return]


class _BoundPlan:
    __slots__ = ("driver", "empty", "like", "matches", "native", "outputs", "plan")

    def __init__(
        self, plan: _Plan, outputs: list[tuple[int, tuple[int, ...], Any, Any]], driver: GpuDriver, like: int
    ) -> None:
        self.plan = plan
        self.outputs = outputs
        self.empty = sys.modules["torch"].empty
        self.driver = driver
        self.like = like
        """The position among the inputs of a tensor whose device the outputs share; -1: none."""
        self.matches: Callable[[tuple[Any, ...]], bool] = lambda args: False
        """Whether a call's inputs have this plan's signature (``_signature_guard``)."""
        self.native: NativePlan | None = None
        """The plan for the native launch path, where it applies."""


__all__ = [
    "PLAN_LIMIT",
    "DeviceFunction",
    "GpuDriver",
    "GpuLauncher",
    "Packer",
    "ScopedFunction",
    "set_prototypes",
    "torch_current_stream",
    "torch_stream_query",
    "unprototyped",
]
