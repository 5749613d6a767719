"""How a GPU kernel is launched: its parameters, launch dims, and the host-side checks.

Every C++-dialect GPU backend reads the same recipe from TVM's host function
(:mod:`tile.ir.gpu.codegen`): which ``__global__`` parameter is which tensor or scalar,
and the grid, block and dynamic shared memory as Python expressions of the kernel's
symbolic dims. The vendor runtimes (CUDA driver, HIP runtime, the CPU emulator) evaluate
those expressions with :func:`evaluate`, pack scalars with :data:`SCALAR_CTYPES` and check
torch arguments with :func:`check_torch_arguments` before anything reaches a driver.

Example::

    recipe = LaunchRecipe("k", (KernelParam("tensor", "X", "float16"),), ("(M // 64)", "1", "1"),
                          ("64", "1", "1"), "0")
    evaluate(recipe.grid[0], {"M": 256})  # 4
"""

from __future__ import annotations

import ast
import ctypes
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from tvm import tirx  # type: ignore[import-untyped]

from tile.layout.errors import TileError

from ..errors import BackendError, SourceLocation
from ..packed import packed_view, subbyte_bits

ParamList = list[tuple[str, str, tuple[int | str, ...] | None]]
"""``(name, dtype, shape)`` of each kernel parameter; shape ``None`` for a scalar, symbolic
dims by name. What the launchers check arguments against."""

ParamSpecs = Sequence[tuple[str, str, tuple[int | str, ...] | None]]
"""Any sequence of :data:`ParamList`'s entries: what a launcher's constructor takes."""

ParamStrides = Mapping[str, tuple[int | str, ...]]
"""The declared element strides of each ``T.StridedTensor`` parameter, by name (symbolic strides
by name, as in :data:`ParamList`'s shapes); a tensor parameter not named here is row-major."""

Fail = Callable[[str, str], Exception]
"""``fail(message, hint)``: the vendor's typed launch error, naming the kernel."""


@dataclasses.dataclass(frozen=True)
class KernelParam:
    """One ``__global__`` parameter: a tensor's data pointer or a scalar.

    ``source`` is the kernel function's tensor parameter name (``kind="tensor"``), or
    the name of a scalar parameter or symbolic dim (``kind="scalar"``). A backend may add
    kinds of its own (CUDA's ``"tensormap"``, whose box plan ``tma`` holds).
    """

    kind: str
    source: str
    dtype: str
    tma: dict[str, Any] | None = None
    """``kind="tensormap"``: the box plan of ``source``'s tensor map (CUDA's TMA lowering)."""


@dataclasses.dataclass(frozen=True)
class LaunchRecipe:
    """How to launch the kernel: its symbol, parameters and launch dims.

    ``grid``/``block`` are three Python expressions each (of symbolic dim names);
    ``dynamic_shared`` is the dynamic shared-memory size in bytes (an expression).
    """

    kernel_name: str
    params: tuple[KernelParam, ...]
    grid: tuple[str, str, str]
    block: tuple[str, str, str]
    dynamic_shared: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchRecipe:
        grid, block = tuple(data["grid"]), tuple(data["block"])
        if len(grid) != 3 or len(block) != 3:
            raise BackendError(f"a launch recipe needs three grid and block dims, got {grid} and {block}")
        return cls(
            kernel_name=data["kernel_name"],
            params=tuple(KernelParam(**p) for p in data["params"]),
            grid=(str(grid[0]), str(grid[1]), str(grid[2])),
            block=(str(block[0]), str(block[1]), str(block[2])),
            dynamic_shared=data["dynamic_shared"],
        )


def kernel_params(func: Any) -> ParamList:
    """``(name, dtype, shape)`` of each parameter of the PrimFunc ``func`` (shape ``None`` for a
    scalar; symbolic dims by name): what the launchers check arguments against."""
    out: ParamList = []
    for param in func.params:
        if tirx.is_buffer_var(param):
            shape = tuple(int(d.value) if isinstance(d, tirx.IntImm) else str(d) for d in param.shape)
            out.append((str(param.name), str(param.dtype), shape))
        else:
            out.append((str(param.name), str(param.ty), None))
    return out


def kernel_strides(func: Any) -> dict[str, tuple[int | str, ...]]:
    """The declared element strides of each ``T.StridedTensor`` parameter of ``func``, by name
    (:data:`ParamStrides`): what the launchers check a strided argument against and bind its
    symbolic strides from."""
    out: dict[str, tuple[int | str, ...]] = {}
    for param in func.params:
        if tirx.is_buffer_var(param) and len(param.strides):
            out[str(param.name)] = tuple(
                int(d.value) if isinstance(d, tirx.IntImm) else str(d) for d in param.strides
            )
    return out


_BINOPS = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "FloorDiv": "//",
    "FloorMod": "%",
    "Div": "//",
    "Mod": "%",
}


def python_expr(expr: Any) -> str:
    """An integer TIR expression as Python source over its variable names (read by :func:`evaluate`)."""
    if isinstance(expr, int):
        return str(expr)
    if isinstance(expr, tirx.IntImm):
        return str(int(expr.value))
    if isinstance(expr, tirx.Var):
        return str(expr.name)
    kind = type(expr).__name__
    if kind in _BINOPS:
        return f"({python_expr(expr.a)} {_BINOPS[kind]} {python_expr(expr.b)})"
    if kind in ("Min", "Max"):
        return f"{kind.lower()}({python_expr(expr.a)}, {python_expr(expr.b)})"
    if kind == "Cast":
        return python_expr(expr.value)
    raise BackendError(f"cannot evaluate the launch dimension {expr} on the host")


def _backend_error(message: str, hint: str) -> Exception:
    return BackendError(message, hint=hint)


def evaluate(expr: str, names: dict[str, int], fail: Fail = _backend_error) -> int:
    """Evaluate a launch-dimension expression written by :func:`python_expr`.

    ``names`` gives the symbolic dims and scalars; a name no argument gives raises
    ``fail(message, hint)`` (a ``BackendError`` unless the launcher passes its own).
    """

    def ev(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise fail(
                    f"the launch needs the value of {node.id}, which no argument gives",
                    "pass every scalar parameter and tensors of the declared rank",
                )
            return names[node.id]
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            if type(node.op) in ops:
                return ops[type(node.op)]
            if isinstance(node.op, ast.FloorDiv):
                return a // b
            if isinstance(node.op, ast.Mod):
                return a % b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            values = [ev(a) for a in node.args]
            return min(values) if node.func.id == "min" else max(values)
        raise fail(f"unexpected launch expression {ast.dump(node)}", "rebuild the kernel")

    return ev(ast.parse(expr, mode="eval").body)


_DIM_NODES = (
    ast.Expression,
    ast.Tuple,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.Call,
)


def compile_launch_dims(
    recipe: LaunchRecipe, fail: Fail = _backend_error
) -> Callable[[dict[str, int]], tuple[int, ...]]:
    """The recipe's seven launch values ``(grid x3, block x3, dynamic shared bytes)`` as one function
    of the symbolic-dim values, parsed and compiled once (a launcher calls it per argument
    signature, never re-parsing text per call).

    The expressions are those :func:`python_expr` writes; anything else (a name call other than
    ``min``/``max``, an attribute, a string) raises ``fail`` here, before it could run.
    """
    texts = (*recipe.grid, *recipe.block, recipe.dynamic_shared)
    tree = ast.Expression(ast.Tuple([ast.parse(t, mode="eval").body for t in texts], ast.Load()))
    free: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _DIM_NODES) or (
            isinstance(node, ast.Constant) and type(node.value) is not int
        ):
            raise fail(f"unexpected launch expression {ast.dump(node)}", "rebuild the kernel")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in ("min", "max") and not node.keywords
        ):
            raise fail(f"unexpected launch expression {ast.dump(node)}", "rebuild the kernel")
        if isinstance(node, ast.Name) and node.id not in ("min", "max"):
            free.add(node.id)
    code = compile(ast.fix_missing_locations(tree), f"<launch dims of {recipe.kernel_name}>", "eval")
    builtins = {"__builtins__": {}, "min": min, "max": max}
    if not free:  # every dim a constant: evaluated once, here
        constant = tuple(int(v) for v in eval(code, builtins))
        return lambda names: constant

    def dims(names: dict[str, int]) -> tuple[int, ...]:
        missing = sorted(free - names.keys())
        if missing:
            raise fail(
                f"the launch needs the value of {missing[0]}, which no argument gives",
                "pass every scalar parameter and tensors of the declared rank",
            )
        try:
            return tuple(int(v) for v in eval(code, builtins, dict(names)))
        except ZeroDivisionError:
            raise fail(
                f"a launch dimension divides by zero with {names}", "check the scalar arguments"
            ) from None

    return dims


def launch_dim_names(recipe: LaunchRecipe) -> frozenset[str]:
    """The symbolic dims and scalars the recipe's launch values depend on."""
    texts = (*recipe.grid, *recipe.block, recipe.dynamic_shared)
    return frozenset(
        n.id for t in texts for n in ast.walk(ast.parse(t, mode="eval")) if isinstance(n, ast.Name)
    ) - {"min", "max"}


SCALAR_CTYPES: dict[str, Any] = {
    # ctypes of scalar kernel parameters (every launcher, the emulator's included)
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "bool": ctypes.c_bool,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "handle": ctypes.c_void_p,
}

POINTER_DTYPE = "handle"
"""The dtype of a ``T.ptr`` parameter (a scalar ``KernelParam``): the caller passes an address."""


def is_pointer_dtype(dtype: str) -> bool:
    """Whether a parameter of this dtype is a ``T.ptr``: the recipe's ``handle``, or the
    ``T.handle`` (``T.handle("float16")``) :func:`kernel_params` reads off the function."""
    return dtype == POINTER_DTYPE or dtype.startswith("T.handle")


def pointer_address(name: str, value: Any, fail: Fail) -> int:
    """The address a ``T.ptr`` argument stands for: an int (``x.data_ptr()``) or the ``c_void_p``
    tile.lang passes (it takes a tensor's or array's address for the caller, as TileLang does:
    ``tile.lang``'s ``pointer_argument``)."""
    if isinstance(value, ctypes.c_void_p):
        return int(value.value or 0)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise fail(f"argument {name} is a T.ptr, got a {type(value).__name__}",
               "pass x.data_ptr(), or call the kernel through tile.lang")


def scalar_argument(param: KernelParam, names: dict[str, int], by_name: dict[str, Any], fail: Fail) -> Any:
    """The ctypes value of a ``kind="scalar"`` parameter: a symbolic dim's or a scalar argument's."""
    raw = names.get(param.source, by_name.get(param.source))
    if raw is None:
        raise fail(f"no value for the kernel parameter {param.source}", "pass every scalar")
    if is_pointer_dtype(param.dtype):
        return ctypes.c_void_p(pointer_address(param.source, raw, fail))
    return SCALAR_CTYPES.get(param.dtype, ctypes.c_int32)(raw)


def launch_dims(recipe: LaunchRecipe, names: dict[str, int], fail: Fail) -> tuple[list[int], list[int], int]:
    """``(grid, block, dynamic shared bytes)`` of ``recipe`` for these symbolic-dim values."""
    grid = [evaluate(e, names, fail) for e in recipe.grid]
    block = [evaluate(e, names, fail) for e in recipe.block]
    return grid, block, evaluate(recipe.dynamic_shared, names, fail)


def check_torch_arguments(
    params: ParamSpecs,
    args: Sequence[Any],
    fail: Fail,
    vendor: str,
    tensor_hint: str,
    scalars_must_be_numbers: bool = False,
    device_type: str = "cuda",
    strides: ParamStrides | None = None,
) -> tuple[dict[str, int], int]:
    """The launch checks every GPU backend shares: count, device, dtype, shape, strides.

    ``params`` are ``(name, dtype, shape or None for a scalar)``; tensors must be torch tensors
    on a ``device_type`` device (``cuda``: torch's ROCm build names its GPUs so too; a recording
    test driver serves ``cpu`` tensors) and row-major, except the ``T.StridedTensor`` parameters
    named in ``strides``, whose strides must be the declared ones (symbolic strides are bound
    like symbolic dims). Returns the symbolic-dim, symbolic-stride and scalar values by name
    and the device index; a mismatch raises ``fail(message, hint)``.
    """
    declared_strides = strides or {}
    if len(args) != len(params):
        raise fail(f"expected {len(params)} arguments, got {len(args)}", "pass every parameter")
    torch = sys.modules.get("torch")
    names: dict[str, int] = {}
    device: int | None = None
    for (name, dtype, shape), value in zip(params, args, strict=True):
        if shape is None:
            if is_pointer_dtype(dtype):  # T.ptr: an address (tile.lang passes a c_void_p)
                pointer_address(name, value, fail)
                continue
            if scalars_must_be_numbers and not isinstance(value, int | float):
                raise fail(f"argument {name} must be a number, got {type(value).__name__}", "pass a scalar")
            names[name] = value
            continue
        if torch is None or not isinstance(value, torch.Tensor) or value.device.type != device_type:
            where = getattr(getattr(value, "device", None), "type", type(value).__name__)
            raise fail(
                f"argument {name} is a {where} value; this kernel runs on a {vendor} device", tensor_hint
            )
        index = int(value.device.index or 0)
        if device is None:
            device = index
        elif index != device:
            raise fail(
                f"argument {name} is on {value.device}, other arguments on {device_type}:{device}",
                "put every tensor on the same device",
            )
        got = str(value.dtype).removeprefix("torch.")
        logical = argument_shape(name, dtype, got, tuple(value.shape), fail)
        check_shape(name, logical, shape, names, fail, "pass a tensor")
        if name in declared_strides:
            steps = argument_strides(name, dtype, got, tuple(value.shape), tuple(value.stride()), fail)
            check_strides(name, steps, declared_strides[name], names, fail)
        elif not value.is_contiguous():
            raise fail(
                f"argument {name} has strides {list(value.stride())}, the kernel needs row-major",
                "pass x.contiguous()",
            )
    if device is None and any(is_pointer_dtype(dtype) for _, dtype, _ in params) and torch is not None:
        # addresses only (T.ptr): torch's current device
        device = int(torch.cuda.current_device()) if torch.cuda.is_available() else 0
    if device is None:
        raise fail(f"no tensor argument tells which {vendor} device to use", f"pass a {vendor} tensor")
    return names, device


def argument_shape(name: str, declared: str, got: str, shape: tuple[int, ...], fail: Fail) -> tuple[int, ...]:
    """The shape to check a ``got``-typed tensor argument against a ``declared`` parameter's: its
    own, or the logical one of a sub-byte parameter's packed storage (``tile.ir.packed``); another
    dtype raises ``fail``."""
    if got == declared:
        return shape
    packed = packed_view(declared, got, shape)
    if packed is None:
        bits = subbyte_bits(declared)
        hint = f"pass uint8 storage, {8 // bits} codes per byte" if bits else f"use x.to(torch.{declared})"
        raise fail(f"argument {name} has dtype {got}, expected {declared}", hint)
    return packed[0]


def argument_strides(
    name: str, declared: str, got: str, shape: tuple[int, ...], strides: tuple[int, ...], fail: Fail
) -> tuple[int, ...]:
    """The element strides to check a ``got``-typed argument of ``strides`` against a
    ``T.StridedTensor`` parameter's: its own, or the logical ones of a sub-byte parameter's packed
    storage (``tile.ir.packed``: a byte stride times the codes per byte, the last dim's 1)."""
    if got == declared:
        return strides
    packed = packed_view(declared, got, shape, strides)
    if packed is None or packed[1] is None:
        raise fail(
            f"argument {name} has strides {list(strides)}: packed sub-byte storage needs its last "
            "dim's stride 1 (two codes share a byte)",
            "slice rows only, or pass x.contiguous()",
        )
    return packed[1]


def matches_binding(got: Sequence[Any], want: Sequence[int | str], names: dict[str, int]) -> bool:
    """Whether the values ``got`` (an argument's dims or strides) match the declared ``want``:
    constants equal, each symbolic name bound into ``names`` on first sight and equal after
    (an expression of other names is left to the kernel)."""
    ok = len(got) == len(want)
    for got_value, value in zip(got, want, strict=False):
        if isinstance(value, int):
            ok = ok and int(got_value) == value
        elif value.isidentifier() and names.setdefault(value, int(got_value)) != int(got_value):
            ok = False
    return ok


def check_strides(
    name: str, got: Sequence[int], want: Sequence[int | str], names: dict[str, int], fail: Fail
) -> None:
    """Check a ``T.StridedTensor`` argument's element strides against the declared ones, binding
    symbolic strides into ``names`` (an expression of other names is left to the kernel)."""
    if not matches_binding(got, want, names):
        raise fail(
            f"argument {name} has element strides {list(got)}, the kernel declares {list(want)}",
            "pass a view with the declared strides, or declare them symbolic: "
            "T.StridedTensor((M, N), (s0, 1), dtype) with s0 = T.dynamic('s0')",
        )


def memory_span(shape: Sequence[int], strides: Sequence[int], item_bytes: int) -> int:
    """Bytes from a tensor's first element to the end of its last, for element ``strides`` of at
    least 0 (a strided view spans more than its elements; an empty one spans nothing)."""
    if any(int(d) == 0 for d in shape):
        return 0
    return (1 + sum((int(d) - 1) * int(s) for d, s in zip(shape, strides, strict=True))) * item_bytes


def check_shape(
    name: str,
    got: Sequence[Any],
    want: Sequence[int | str],
    names: dict[str, int],
    fail: Fail,
    what: str,
) -> None:
    """Check an argument's shape against the declared one, binding symbolic dims into ``names``."""
    if not matches_binding(got, want, names):
        raise fail(
            f"argument {name} has shape {list(got)}, expected {list(want)}",
            f"{what} of the shape the kernel was compiled for",
        )


class KernelLauncher:
    """What every launcher of a built kernel holds (GPU runtime or emulator): the launch
    recipe, the parameters the arguments are checked against, and the user's kernel source
    line; and how its errors are typed (``launch_error``, naming the kernel)."""

    launch_error: ClassVar[type[TileError]] = BackendError
    where: ClassVar[str] = ""
    """Said after the kernel's name in every error, e.g. ``", emulated"``."""

    def __init__(
        self,
        recipe: LaunchRecipe,
        params: ParamSpecs,
        location: SourceLocation | None = None,
        strides: ParamStrides | None = None,
    ) -> None:
        self.recipe = recipe
        self.params = list(params)  # (name, dtype, shape or None for scalars)
        self.location = location
        self.strides = dict(strides or {})  # T.StridedTensor parameters: their declared strides

    def _fail(self, message: str, hint: str) -> TileError:
        return self.launch_error(
            f"{message} (kernel {self.recipe.kernel_name}{self.where})", hint=hint, location=self.location
        )
