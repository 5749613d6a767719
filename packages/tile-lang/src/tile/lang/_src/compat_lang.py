"""``T.*`` helpers TileLang programs use that are plain expressions, dtypes or buffers.

Each builds ordinary IR (arithmetic, ``Let``-free index math, buffer declarations), so
every backend runs them; names whose hardware tile does not target are in
``unsupported.py`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from ..errors import (
    ArgumentAssertionError,
    ArgumentTypeError,
    ArgumentValueError,
    TileScopeError,
    TileTypeError,
)
from .builtins import _alloc, _kernel, get_thread_binding
from .dtypes import dtype_name, shape_list
from .fast_math import fast_math_16bit
from .int_constants import int_constant, integer_range
from .scalars import serial
from .session import current_session, in_kernel_session

C_NAMES = {
    "double": "float64",
    "float": "float32",
    "int": "int32",
    "long": "int64",
    "short": "int16",
    "uint": "uint32",
    "ulong": "uint64",
}
"""C's type names ``T.dtype`` accepts, as TileLang does: ``T.dtype("uint") == T.uint == "uint32"``."""


class dtype(tvm.DataType):  # TileLang's lower-case name: ``T.dtype("float16")``
    """An element type that is also its name: ``T.dtype("float16") == "float16"``.

    A ``tvm.DataType`` (apache-tvm's dtype, itself a ``str``), as TileLang's dtypes are, so
    ``isinstance(T.float16, tvm.DataType)`` holds and TVM's ``is_float()``/``itemsize`` work.

    Usable wherever a dtype string is (``T.alloc_shared(shape, T.dtype(x))``), and as a
    constructor of constants (``T.dtype("float16")(1.5)``).

    Example::

        >>> d = dtype("bfloat16")
        >>> d == "bfloat16", d.bits, d.lanes
        (True, 16, 1)
    """

    _is_meta_class = True
    """TVMScript binds such values as Python values: ``dtype = T.float`` works in a kernel body."""

    def __new__(cls, value: Any) -> dtype:
        name = dtype_name(value)
        name = C_NAMES.get(name, name)
        try:
            return super().__new__(cls, name)
        except (ValueError, TypeError) as exc:
            raise TileTypeError(
                f"T.dtype({name!r}): {name!r} is not an element type",
                hint="use a name such as float16, bfloat16, float32, int8, uint32, "
                "float8_e4m3fn, or a vector type such as float16x2",
            ) from exc

    __repr__ = str.__repr__  # the name, quoted, as before (tvm.DataType prints dtype('...'))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str.__str__(self),))

    @property
    def _dtype_str(self) -> str:
        return str.__str__(self)

    @property
    def bytes(self) -> int:
        """Bytes per element (``itemsize``; a 4-bit type rounds up to 1)."""
        return int(self.itemsize)

    def is_float4_e2m1fn(self) -> bool:
        """Whether this is FP4 E2M1 packed two per byte (``float4_e2m1fn``, vectors too)."""
        return str.__str__(self) == "float4_e2m1fn" or str.__str__(self) in FP4_VECTORS

    def is_float4_e2m1_unpacked(self) -> bool:
        """Whether this is FP4 E2M1 stored one per byte (``T.float4_e2m1_unpacked``)."""
        return False

    def is_float4(self) -> bool:
        """Whether this is FP4 E2M1, packed or unpacked."""
        return self.is_float4_e2m1fn() or self.is_float4_e2m1_unpacked()

    def as_torch(self) -> Any:
        """The ``torch.dtype`` of this type; 4-bit types give their storage type, as in TileLang:
        ``float4_e2m1fn`` and ``float4_e2m1fnx2`` torch's ``float4_e2m1fn_x2`` (``int8`` where
        torch lacks it), ``int4`` ``int8``."""
        from .tensor_utils import map_torch_type, torch_storage_dtype_name

        return map_torch_type(torch_storage_dtype_name(str.__str__(self)))

    def __call__(self, value: Any = None, *more: Any) -> Any:
        if more:
            return pack_lanes(self, [value, *more])
        if value is None:  # a scalar variable of this type, as TVMScript's ``T.float32()``
            constructor = getattr(_script, str.__str__(self), None)
            if constructor is None:
                raise ArgumentTypeError(
                    f"T.dtype({str(self)!r})() needs a value: TVMScript declares no variable of {self}",
                    hint=f"write T.dtype({str(self)!r})(0) for a constant, or use it as a type name",
                )
            return constructor()
        if isinstance(value, ir.Expr):
            return tirx.Cast(str(self), value)
        return tirx.const(value, str(self))


def pack_lanes(vector: dtype, values: list[Any]) -> Any:
    """``T.bfloat16x2(a, b)``: the vector whose lanes are ``values``, in order (TileLang's form).

    Each value is converted to the element type (a Python number becomes a constant of it);
    the count must be the vector's lane count.
    """
    name = str.__str__(vector)
    lanes = int(vector.lanes)
    if lanes != len(values):
        raise ArgumentValueError(
            f"T.{name}(...) got {len(values)} values for {lanes} lane{'s' if lanes != 1 else ''}",
            hint=f"give one value per lane: T.{name}({', '.join(f'x{i}' for i in range(lanes))})",
        )
    element = str(tvm.DataType(name).with_lanes(1))
    lane_values = []
    for value in values:
        if not isinstance(value, ir.Expr):
            value = tirx.const(value, element)
        elif str(value.ty) != element:
            value = tirx.Cast(element, value)
        lane_values.append(value)
    return tirx.Shuffle(lane_values, [tirx.const(i, "int32") for i in range(lanes)])


FP4_VECTORS = frozenset(f"float4_e2m1fnx{n}" for n in (2, 4, 8, 16, 32, 64))
"""The vector forms of ``float4_e2m1fn``."""


class script_dtype(dtype):
    """``T.float16`` and the other element types TVMScript defines: a :class:`dtype` (so
    ``getattr(torch, T.float16)`` and ``dtype == "float16"`` work, as in TileLang) that calls and
    subscripts as TVMScript's constructor does: ``T.int32()`` declares a variable, ``x: T.int32``
    annotates a scalar parameter, ``T.float32(0)`` is a constant, ``T.float32[4]`` a local vector."""

    def __call__(self, value: Any = None, *more: Any) -> Any:
        if more:
            return pack_lanes(self, [value, *more])
        if isinstance(value, int) and not isinstance(value, bool) and integer_range(str(self)):
            # T.uint64(2**64 - 1): TVMScript's constructor takes no int beyond int64
            return int_constant(value, str(self), f"T.{self}({value})")
        try:
            return getattr(_script, str(self))(value)
        except AttributeError:  # apache-tvm 0.27 registers no builder for most vector types
            raise ArgumentTypeError(
                f"T.{self}({'' if value is None else value!r}): apache-tvm builds no {self} scalar",
                hint=f"{self} is usable as an element type (T.alloc_local((n,), T.{self})); "
                "make a vector value with T.Broadcast(x, lanes) or by loading a slice",
            ) from None

    def __getitem__(self, shape: Any) -> Any:  # type: ignore[override]
        return getattr(_script, str(self))[shape]


def is_dtype_constructor(value: Any) -> bool:
    """Whether ``value`` is one of TVMScript's element-type constructors (``T.float16x2``)."""
    return type(value).__name__ == "DtypeConstructor" and isinstance(getattr(value, "_dtype_str", None), str)


int4 = dtype("int4")
uint4 = dtype("uint4")
bfloat16x2 = dtype("bfloat16x2")
bfloat16x4 = dtype("bfloat16x4")
bfloat16x8 = dtype("bfloat16x8")


def infinity(dtype: Any) -> Any:
    """``+inf`` of a floating-point type (float16, bfloat16, float32, float64, float8_e5m2, ...)."""
    name = dtype_name(dtype)
    finite_only = "fn" in name.split("_")[-1] or name.startswith(("float6_", "float4_"))  # e4m3fn, e8m0fnu
    if not name.startswith(("float", "bfloat")) or finite_only:
        raise ArgumentValueError(
            f"T.infinity({name!r}): {name} has no infinity",
            hint="use T.max_value(dtype) for the largest finite value",
        )
    return tirx.const(float("inf"), name)


def clamp(dst: Any, min_val: Any, max_val: Any) -> Any:
    """``dst`` limited to ``[min_val, max_val]``: ``max(min(dst, max_val), min_val)``.

    The parameter names are TileLang's: ``T.clamp(x, min_val=lo, max_val=hi)``."""
    return _script.max(_script.min(dst, max_val), min_val)


def align_up(value: Any, alignment: Any) -> Any:
    """The smallest multiple of ``alignment`` that is ``>= value`` (ints or index expressions)."""
    return (value + alignment - 1) // alignment * alignment


def index_to_coordinates(index: Any, shape: Sequence[Any]) -> list[Any]:
    """The row-major coordinates of flat ``index`` in ``shape`` (the inverse of flattening)."""
    coords: list[Any] = []
    for extent in reversed(list(shape)):
        coords.append(tirx.floormod(index, extent) if isinstance(index, ir.Expr) else index % extent)
        index = tirx.floordiv(index, extent) if isinstance(index, ir.Expr) else index // extent
    return list(reversed(coords))


def get_block_binding(dim: Any = 0) -> Any:
    """The block index along grid dimension ``dim`` of the enclosing ``T.Kernel``."""
    kernel = _kernel("T.get_block_binding")
    if not 0 <= dim < len(kernel.block_vars):
        raise TileScopeError(
            f"T.get_block_binding({dim}): the kernel's grid has {len(kernel.block_vars)} dimensions",
            hint=f"pass 0..{len(kernel.block_vars) - 1}",
        )
    return kernel.block_vars[dim]


def get_block_bindings() -> list[Any]:
    """Every block index of the enclosing ``T.Kernel``, x first."""
    return list(_kernel("T.get_block_bindings").block_vars)


Serial = serial
"""``for i in T.Serial(n)``: TileLang's capitalised spelling of ``T.serial``."""


def While(condition: Any) -> Any:  # TileLang's name
    """``with T.While(cond):`` runs its body while ``cond`` holds: TileLang's spelling of a
    ``while cond:`` loop in a kernel (the condition is read before every trip)."""
    _kernel("T.While")
    if isinstance(condition, bool | int):
        condition = tirx.const(bool(condition), "bool")
    if not isinstance(condition, ir.Expr) or str(condition.ty) != "bool":
        raise TileTypeError(
            f"T.While takes a boolean expression, got {condition}",
            hint="compare explicitly: T.While(state[0] == 0)",
        )
    return B.While(condition)


_LAUNCH_TAGS = {
    "blockIdx.x": ("block_vars", 0, "grid"),
    "blockIdx.y": ("block_vars", 1, "grid"),
    "blockIdx.z": ("block_vars", 2, "grid"),
    "threadIdx.x": ("thread_vars", 0, "threads"),
    "threadIdx.y": ("thread_vars", 1, "threads"),
    "threadIdx.z": ("thread_vars", 2, "threads"),
}


def launch_thread(tag: str, extent: Any) -> Any:
    """``tx = T.launch_thread("threadIdx.x", 256)`` inside ``T.Kernel``: the index the kernel
    already launches along that axis (``blockIdx.*`` or ``threadIdx.*``); ``extent`` must be
    the kernel's own extent there (tile launches each axis once, with ``T.Kernel``'s sizes)."""
    kernel = _kernel("T.launch_thread")
    if tag not in _LAUNCH_TAGS:
        raise ArgumentValueError(
            f"T.launch_thread({tag!r}, ...): not a launch axis",
            hint="name one of " + ", ".join(_LAUNCH_TAGS),
        )
    attr, dim, sizes_attr = _LAUNCH_TAGS[tag]
    handles, sizes = getattr(kernel, attr), list(getattr(kernel, sizes_attr))
    known = sizes[dim] if dim < len(sizes) else 1
    same = tvm.sym.Analyzer().can_prove(tirx.EQ(_as_expr(known), _as_expr(extent)))
    if dim >= len(handles) or not same:
        raise TileScopeError(
            f"T.launch_thread({tag!r}, {extent}): the enclosing T.Kernel launches {known} along {tag}",
            hint=f"pass {known}, or change T.Kernel's {sizes_attr}",
        )
    return get_thread_binding(dim) if attr == "thread_vars" else handles[dim]


def reinterpret(*args: Any, dtype: Any = None, value: Any = None, span: Any = None) -> Any:
    """The bits of ``value`` read as ``dtype`` (same width): ``T.reinterpret(x, T.float32)``,
    TileLang's order, or ``T.reinterpret("float32", x)``, TVMScript's (told apart by which
    argument is an expression)."""
    given = list(args)
    if value is None and dtype is None and len(given) == 2:
        first, second = given
        value, dtype = (first, second) if isinstance(first, ir.Expr) else (second, first)
    elif len(given) == 1:
        value, dtype = (given[0], dtype) if value is None else (value, given[0])
    if value is None or dtype is None or len(given) > 2:
        raise ArgumentTypeError(
            "T.reinterpret takes a value and a dtype", hint="T.reinterpret(bits[i], T.float32)"
        )
    return _script.reinterpret(dtype_name(dtype), value, span)


ROUNDING_MODES = ("ties-to-even", "ties-away-from-zero")


def round_(x: Any, rounding_mode: str | None = "ties-to-even", span: Any = None) -> Any:
    """``T.round(x)``: ``x`` rounded to an integer value, halfway cases to the even one;
    ``rounding_mode="ties-away-from-zero"`` rounds them away from zero (2.5 -> 3, -2.5 -> -3).
    16-bit and 8-bit floats are rounded in float32 (which holds them exactly)."""
    mode = rounding_mode or "ties-to-even"
    if mode not in ROUNDING_MODES:
        raise ArgumentValueError(
            f"T.round: unknown rounding_mode {mode!r}", hint=" or ".join(repr(m) for m in ROUNDING_MODES)
        )
    value = tirx.const(x, "float32") if isinstance(x, float | int) and not isinstance(x, bool) else x
    dt = str(value.ty)
    wide = value if dt in ("float32", "float64") else tirx.Cast("float32", value)
    if mode == "ties-to-even":
        rounded = tirx.nearbyint(wide)
    else:  # x - trunc(x) is exact: a fraction of at least one half moves one away from zero
        whole = tirx.trunc(wide)
        one = tirx.const(1.0, str(wide.ty))
        step = _script.if_then_else(wide < tirx.const(0.0, str(wide.ty)), -one, one)
        half = tirx.const(0.5, str(wide.ty))
        rounded = _script.if_then_else(tirx.abs(wide - whole) >= half, whole + step, whole)
    return rounded if rounded.ty == value.ty else tirx.Cast(dt, rounded)


def _as_expr(value: Any) -> Any:
    return value if isinstance(value, ir.Expr) else tirx.const(int(value), "int32")


def func_attr(attrs: dict[str, Any]) -> None:
    """``T.func_attr({"tir.noalias": True, ...})``: attributes recorded on the kernel's function
    (TVMScript's form; tile's own passes read none of TVM's keys)."""
    if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
        raise ArgumentTypeError(
            f"T.func_attr takes a dict with str keys, got {type(attrs).__name__}",
            hint='T.func_attr({"tir.noalias": True})',
        )
    current_session("T.func_attr").func_attrs.update(attrs)


def ldg(value: Any) -> Any:
    """``T.__ldg(A[i])``: ``A[i]`` (CUDA's read-only data-cache load reads the same value; tile
    leaves the choice of load instruction to the backend)."""
    if not isinstance(value, TensorLoad):
        raise ArgumentTypeError(
            f"T.__ldg takes one element of a tensor, got {type(value).__name__}",
            hint="T.__ldg(x[i])",
        )
    return value


def broadcast(value: Any, lanes: int) -> Any:
    """``T.Broadcast(v, n)``: an ``n``-lane vector of ``v`` (store it with ``buf[0:n] = ...``)."""
    if isinstance(value, bool | int | float):
        value = tirx.const(value, "int32" if isinstance(value, int) and not isinstance(value, bool) else None)
    return tirx.Broadcast(value, lanes)


def ramp(base: Any, stride: Any, lanes: int) -> Any:
    """``T.Ramp(b, s, n)``: the ``n``-lane vector ``b, b + s, ..., b + (n - 1) * s``, an index
    that reads or writes ``n`` elements at once (``B[i, T.Ramp(0, 1, 4)] = A[T.Ramp(j, 1, 4)]``)."""
    return tirx.Ramp(base, stride, lanes)


def alloc_buffer(shape: Any, dtype: Any = "float32", scope: str | None = None, *rest: Any) -> Any:
    """A buffer in ``scope`` ("local", "shared.dyn", "local.fragment", ...) inside a kernel
    (default "local"); before the kernels, global scratch as ``T.alloc_global`` makes it
    (TileLang's default scope, "global", the only one there)."""
    if not current_session("T.alloc_buffer").kernels and scope in (None, "global"):
        return alloc_global(shape, dtype)
    return _alloc("T.alloc_buffer", shape, dtype_name(dtype), scope or "local")


def alloc_global(shape: Any, dtype: Any = "float32") -> Any:
    """A scratch tensor in global memory that the kernel's blocks share.

    Outside any ``T.Kernel`` (before the kernels of a function that launches several in
    turn) the tensor is allocated on the tensors' device at each call and every kernel of
    the function sees the same one; inside a kernel it is that kernel's own scratch."""
    session = current_session("T.alloc_global")
    if session.kernels:
        return _alloc("T.alloc_global", shape, dtype_name(dtype), "global")
    name = f"global_scratch{len(session.scratch)}"
    buffer = tirx.decl_buffer(shape_list(shape), dtype_name(dtype), name=name)
    session.scratch.append(buffer)
    return buffer


def reshape(buffer: Any, shape: Any) -> Any:
    """The same elements seen with another shape (row-major; element counts must match)."""
    return view(buffer, shape)


def view(buffer: Any, shape: Any = None, dtype: Any = None) -> Any:
    """``buffer``'s memory seen with another shape and/or element type (row-major)."""
    new_shape = shape_list(shape) if shape is not None else list(buffer.shape)
    new_dtype = dtype_name(dtype) if dtype is not None else str(buffer.dtype)
    old_bits = _count(buffer.shape) * tvm.DataType(str(buffer.dtype)).bits
    new_bits = _count(new_shape) * tvm.DataType(new_dtype).bits
    if old_bits is not None and new_bits is not None and old_bits != new_bits:
        raise ArgumentAssertionError(
            f"T.view of {buffer.name}: {list(buffer.shape)} x {buffer.dtype} is {old_bits} bits, "
            f"{new_shape} x {new_dtype} is {new_bits}",
            hint="the new shape and dtype must cover exactly the same bytes",
        )
    if not in_kernel_session():
        # apache-tvm 0.27 records a buffer's aliasing only in a DeclBuffer statement: a buffer
        # declared outside a kernel would not share the storage of the one it views.
        raise TileScopeError(
            f"T.view of {buffer.name} outside a kernel: a view shares its buffer's storage only "
            "inside a @T.prim_func body",
            hint="call T.view / T.reshape inside the kernel that uses the view",
        )
    return B.decl_buffer(new_shape, new_dtype, data=buffer.data, scope=buffer.scope())


def _count(shape: Sequence[Any]) -> Any:
    total = 1
    for dim in shape:
        if isinstance(dim, tirx.IntImm):
            dim = dim.value
        if not isinstance(dim, int):
            return None
        total *= dim
    return total


IEEE_ROUNDING_MODES = ("rn", "rz", "ru", "rd")
"""CUDA's IEEE rounding modes: to nearest even, towards zero, up (+inf), down (-inf)."""


def _ieee(op: str, rounding_mode: str) -> None:
    if rounding_mode not in IEEE_ROUNDING_MODES:
        raise ArgumentValueError(
            f"Invalid rounding mode {rounding_mode!r} for T.{op}",
            hint="one of " + ", ".join(repr(m) for m in IEEE_ROUNDING_MODES),
        )
    if rounding_mode != "rn":
        raise TileTypeError(
            f"T.{op} with rounding_mode={rounding_mode!r}: "
            "tile computes with IEEE round-to-nearest-even only",
            hint='pass rounding_mode="rn" (the default), or drop the argument',
        )


def ieee_add(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x + y`` rounded to nearest even (IEEE's default, which every backend uses)."""
    _ieee("ieee_add", rounding_mode)
    return x + y


def ieee_sub(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x - y`` rounded to nearest even."""
    _ieee("ieee_sub", rounding_mode)
    return x - y


def ieee_mul(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x * y`` rounded to nearest even."""
    _ieee("ieee_mul", rounding_mode)
    return x * y


def ieee_fdiv(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x / y`` rounded to nearest even."""
    _ieee("ieee_fdiv", rounding_mode)
    return x / y


def ieee_fmaf(x: Any, y: Any, z: Any, rounding_mode: str = "rn") -> Any:
    """``x * y + z`` with one rounding (a fused multiply-add)."""
    _ieee("ieee_fmaf", rounding_mode)
    return _script.fma(x, y, z)


def ieee_frcp(x: Any, rounding_mode: str = "rn") -> Any:
    """``1 / x`` rounded to nearest even."""
    _ieee("ieee_frcp", rounding_mode)
    return 1.0 / x


def ieee_fsqrt(x: Any, rounding_mode: str = "rn") -> Any:
    """``sqrt(x)`` correctly rounded."""
    _ieee("ieee_fsqrt", rounding_mode)
    return _script.sqrt(x)


def ieee_frsqrt(x: Any) -> Any:
    """``1 / sqrt(x)``."""
    return 1.0 / _script.sqrt(x)


def fast_rcp(x: Any) -> Any:
    """``1 / x`` (TileLang's fast reciprocal; tile computes it exactly)."""
    return 1.0 / x


class FastMathTypeError(TileTypeError, TypeError):
    """A fast-math intrinsic (``T.__exp`` ...) applied to a value that is not floating point
    (also a ``TypeError``, as TileLang raises)."""


FAST_MATH_INTRINSICS = {
    "__expf": tirx.exp,
    "__exp10f": tirx.exp10,
    "__logf": tirx.log,
    "__log2f": tirx.log2,
    "__log10f": tirx.log10,
    "__tanf": tirx.tan,
    "__cosf": tirx.cos,
    "__sinf": tirx.sin,
}
"""The approximate float32 intrinsics of CUDA and HIP that ``T.__exp`` ... ``T.__sin`` call, and
the precise function each one approximates (what targets without them compute)."""


def _fast_math(intrinsic_name: str, precise: Any) -> Any:
    name = intrinsic_name.removesuffix("f")

    def intrinsic(x: Any) -> Any:
        value = tirx.const(x, "float32") if isinstance(x, float | int) and not isinstance(x, bool) else x
        dt = str(value.ty) if isinstance(value, ir.Expr) else type(x).__name__
        if not dt.startswith(("float", "bfloat")) or dt.startswith("float8") or dt.startswith("float4"):
            raise FastMathTypeError(
                f"T.{name} only supports floating-point inputs, but got {dt}",
                hint=f"cast the argument first: T.{name}(T.cast(x, 'float32'))",
            )
        if dt == "float64":  # no double-precision intrinsic: the precise function
            return precise(value)
        if dt in ("float16", "bfloat16"):  # computed in float32, as the intrinsics are
            return fast_math_16bit(dt, intrinsic_name, value)  # a call of dt, as TileLang's
        return tirx.call_pure_extern("float32", intrinsic_name, value)

    intrinsic.__name__ = intrinsic.__qualname__ = name
    intrinsic.__doc__ = (
        f"``T.{name}(x)``: the approximate {precise.__name__} of float16/bfloat16/float32 values "
        f"(CUDA's and HIP's ``{intrinsic_name}``, 16-bit values in float32); the precise "
        f"{precise.__name__} for float64 and on targets without such intrinsics (the CPU)."
    )
    return intrinsic


FAST_MATH = {
    intrinsic.removesuffix("f"): _fast_math(intrinsic, precise)
    for intrinsic, precise in FAST_MATH_INTRINSICS.items()
}
"""TileLang's ``T.__exp`` ... ``T.__sin``, by name."""


def sync_threads(barrier_id: Any = None, arrive_count: Any = None) -> Any:
    """A barrier for the block's threads (``__syncthreads()``; nothing to wait for on a CPU).

    ``T.sync_threads(barrier_id, arrive_count)`` waits at named barrier ``barrier_id``
    (1-15) for ``arrive_count`` threads (``bar.sync``; CUDA targets), e.g. for a producer's
    ``T.named_barrier_arrive(barrier_id, arrive_count)``."""
    if barrier_id is None:
        return _script.evaluate(_script.tvm_storage_sync("shared"))
    if arrive_count is None:
        raise TileTypeError(
            "T.sync_threads(barrier_id) needs the number of threads that meet there",
            hint="write T.sync_threads(1, 256), or T.sync_threads() for the whole block",
        )
    return _script.evaluate(tirx.call_extern("void", "tile_named_barrier_sync", barrier_id, arrive_count))


def access_ptr(base: Any, access_type: str = "r", *_extents: Any, **_options: Any) -> Any:
    """The address of ``base``: ``T.access_ptr(A[i, j])`` is ``&A[i, j]``, ``T.access_ptr(A)`` is
    ``&A[0, ...]`` (for passing to ``T.call_extern``). ``access_type`` ("r", "w", "rw") is
    accepted for TileLang programs; tile's analyses read the call's uses instead."""
    if access_type not in ("r", "w", "rw"):
        raise TileTypeError(f"T.access_ptr access_type {access_type!r}", hint='use "r", "w" or "rw"')
    if tirx.is_buffer_var(base):
        return tirx.address_of(base[tuple(0 for _ in base.shape)])
    if isinstance(base, TensorLoad):
        return tirx.address_of(base)
    raise TileTypeError(
        f"T.access_ptr takes a buffer or an element of one, got {type(base).__name__}",
        hint="write T.access_ptr(A[i, j]) or T.access_ptr(A)",
    )


def make_tensor(data: Any, shape: Any, dtype: Any = "float32", *_rest: Any, **_options: Any) -> Any:
    """A tensor of ``shape``/``dtype`` over existing memory ``data``: a buffer's ``.data``, a
    ``T.ptr`` parameter, or an int64 address (an element of a ``T.Tensor([G], T.ptr)`` table)."""
    pointer = data.data if tirx.is_buffer_var(data) else data
    if str(getattr(pointer, "ty", "")) == "int64":  # an address from T.Tensor([G], T.ptr)
        pointer = tirx.reinterpret("handle", pointer)
    if not isinstance(pointer, tirx.Var):
        # a computed address (`a_ptrs[group]`) is bound to a variable first: TVM's storage
        # planner refuses a load in a buffer declaration (the grouped GEMM over a pointer
        # table, whose group index is a `T.alloc_var`: "Load memory in places other than store")
        pointer = B.bind(pointer)
    return B.decl_buffer(shape_list(shape), dtype_name(dtype), data=pointer)


def _same_dtype(name: str, *operands: Any) -> None:
    """Refuse operands of different element types (TileLang's ``ValueError``): TVM would
    silently take the first one's type for the result."""
    dtypes = {str(v.ty) for v in operands if isinstance(v, ir.Expr)}
    if len(dtypes) > 1:
        raise ArgumentValueError(
            f"T.{name} needs operands of the same dtype, got {', '.join(sorted(dtypes))}",
            hint="convert one with T.cast(x, dtype) first",
        )


def add2(x: Any, y: Any) -> Any:
    """Lane-wise ``x + y`` of two-lane values (``float16x2``, ``float32x2``, ...)."""
    _same_dtype("add2", x, y)
    return x + y


def sub2(x: Any, y: Any) -> Any:
    """Lane-wise ``x - y``."""
    _same_dtype("sub2", x, y)
    return x - y


def mul2(x: Any, y: Any) -> Any:
    """Lane-wise ``x * y``."""
    _same_dtype("mul2", x, y)
    return x * y


def fma2(x: Any, y: Any, z: Any) -> Any:
    """Lane-wise ``x * y + z``, rounded once. float16 and bfloat16 lanes are computed in float32
    (where their product is exact) and rounded back, on every backend alike."""
    _same_dtype("fma2", x, y, z)
    dtype = str(getattr(x, "ty", ""))
    kind = tvm.DataType(dtype) if dtype else None
    if kind is None or kind.bits != 16 or str(kind.with_lanes(1)) not in ("float16", "bfloat16"):
        return _script.fma(x, y, z)
    wide = str(tvm.DataType("float32").with_lanes(int(kind.lanes)))
    return tirx.Cast(dtype, _script.fma(*(tirx.Cast(wide, v) for v in (x, y, z))))


def max2(x: Any, y: Any) -> Any:
    """Lane-wise maximum."""
    _same_dtype("max2", x, y)
    return _script.max(x, y)


def min2(x: Any, y: Any) -> Any:
    """Lane-wise minimum."""
    _same_dtype("min2", x, y)
    return _script.min(x, y)


def abs2(x: Any) -> Any:
    """Lane-wise absolute value."""
    return _script.abs(x)


def pdl_trigger() -> None:
    """Programmatic dependent launch: let the next kernel start early. tile launches without
    PDL, so the next kernel starts when this one ends, which this permits."""


def pdl_sync() -> None:
    """Programmatic dependent launch: wait for the previous kernel's writes. Without PDL the
    stream already orders kernels, so they are visible here."""


def im2col(
    img: Any,
    col: Any,
    nhw_step: Any,
    c_step: Any,
    kernel: int,
    stride: int,
    dilation: int,
    pad: int,
    *_rest: Any,
    **_options: Any,
) -> None:
    """Fill the ``(block_M, block_K)`` tile ``col`` with block ``(nhw_step, c_step)`` of the
    im2col matrix of the NHWC image ``img`` for a ``kernel x kernel`` convolution: row
    ``m`` is output pixel ``(n, oh, ow)``, column ``k`` is ``(kh, kw, c)``; padding and
    rows/columns past the matrix read as zero.
    """
    from .builtins import Parallel

    rows, cols = (int(d) for d in col.shape)
    batch, height, width, channels = img.shape
    out_h = (height + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    out_w = (width + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    with Parallel(rows, cols) as (i, j):
        m = nhw_step * rows + i
        k = c_step * cols + j
        n, oh, ow = m // (out_h * out_w), m // out_w % out_h, m % out_w
        kh, kw, c = k // (kernel * channels), k // channels % kernel, k % channels
        h = oh * stride + kh * dilation - pad
        w = ow * stride + kw * dilation - pad
        inside = tirx.all(
            m < batch * out_h * out_w, k < kernel * kernel * channels, h >= 0, h < height, w >= 0, w < width
        )
        value = _script.if_then_else(inside, img[n, h, w, c], tirx.const(0, str(col.dtype)))
        B.buffer_store(col, value, [i, j])


c2d_im2col = im2col
"""TileLang's older name of ``im2col``."""


def let(var: Any, value: Any) -> None:
    """Bind the scalar variable ``var`` (made by ``T.int32()``, ...) to ``value`` from here on:
    ``off = T.int32(); T.let(off, ko * 32)``."""
    if not isinstance(var, tirx.Var):
        raise TileTypeError(
            f"T.let binds a variable made by T.int32() (or another dtype), got {type(var).__name__}",
            hint="write off = T.int32(); T.let(off, value), or simply off = value",
        )
    B.bind(value, var=var)


def precise_fast_math(func: Any) -> Any:
    """``func`` with every ``T.__exp`` ... ``T.__sin`` intrinsic call replaced by the precise
    function: for targets whose device language has no such intrinsics (the CPU)."""
    import tvm_ffi

    found: list[Any] = []

    def note(call: Any) -> None:
        if _fast_math_name(call) is not None:
            found.append(call)

    tvm_ffi.structural_walk(func.body, [(ir.Call, note)])
    if not found:
        return func

    def precise(call: Any) -> Any:
        name = _fast_math_name(call)
        return call if name is None else FAST_MATH_INTRINSICS[name](call.args[1])

    new = func.with_body(tvm_ffi.structural_map(func.body, (ir.Call, precise)))
    if hasattr(func, "__name__"):
        new.__name__ = func.__name__
    return new


def _fast_math_name(call: Any) -> str | None:
    op = getattr(call, "op", None)
    if not isinstance(op, ir.Op) or op.name != "tirx.call_pure_extern" or len(call.args) != 2:
        return None
    name = getattr(call.args[0], "value", None)
    return name if name in FAST_MATH_INTRINSICS else None
