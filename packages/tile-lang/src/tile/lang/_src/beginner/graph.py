"""The beginner tier's traced values: arrays whose operations build a dataflow graph.

Inside a ``@tb.jit`` function every argument is an :class:`Array`. Its operators and the
``tb.*`` functions follow numpy's broadcasting and dtype promotion (Python scalars are
"weak", as in NumPy 2), record a :class:`Node` each, and remember the user's source line
so that a mistake is reported where it was made.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tile.ir.errors import SourceLocation, TileError, TileShapeError

from ..callsite import call_site

Dim = int | str
"""An extent: a concrete size, or the name of a symbolic size (``tb.Tensor[("M", 64), ...]``)."""

UNARY = ("neg", "exp", "exp2", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "abs")
ARITHMETIC = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
COMPARISON = ("lt", "le", "gt", "ge", "eq", "ne")
REDUCTIONS = ("sum", "max", "min", "mean")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SUPPORTED = (
    "operators + - * / ** and comparisons (numpy broadcasting and promotion), @, .astype, .T, .mT, "
    ".sum/.max/.min/.mean(axis=, keepdims=), tb.transpose, tb.exp/exp2/log/sqrt/rsqrt/tanh/sigmoid/"
    "relu/gelu/silu/abs/maximum/minimum/where/clip/softmax, .shape, .ndim, .dtype"
)


class BeginnerError(TileError):
    """A beginner-tier program uses something the tier does not support, or misuses it."""


@dataclasses.dataclass(eq=False)
class Node:
    """One operation of the traced graph. ``op`` is input/const/unary/binary/where/cast/reduce/
    matmul/transpose; ``attrs`` holds its parameters (fn, axes, keepdims, perm, value, ...)."""

    op: str
    inputs: tuple[Node, ...]
    shape: tuple[Dim, ...]
    dtype: str
    attrs: dict[str, Any]
    location: SourceLocation | None

    @property
    def ndim(self) -> int:
        return len(self.shape)


def normalize_dtype(dtype: Any) -> str:
    """'float16', np.float16, torch.float16 -> 'float16'; 'float' -> 'float32'."""
    name = str(getattr(dtype, "name", None) or dtype).removeprefix("torch.")
    name = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "bool_": "bool"}.get(
        name, name
    )
    valid = (*FLOAT_DTYPES, "int8", "int16", "int32", "int64", "uint8", "bool")
    if name not in valid:
        raise BeginnerError(
            f"unsupported dtype {dtype!r}", hint=f"use one of {', '.join(valid)}", location=call_site()
        )
    return name


def _promote(a: str, b: str) -> str:
    if a == b:
        return a
    if "bfloat16" in (a, b):
        other = b if a == "bfloat16" else a
        # bfloat16 with an integer or bool stays bfloat16; with another float it widens.
        if other in ("float32", "float64"):
            return other
        return "float32" if other == "float16" else "bfloat16"
    return str(np.result_type(np.dtype(a), np.dtype(b)))


def _promote_scalar(dtype: str, value: float | int | bool) -> str:
    if dtype == "bfloat16":
        return dtype
    return str(np.result_type(np.dtype(dtype), value))


def _float_of(dtype: str) -> str:
    """The dtype numpy gives a transcendental function of ``dtype``."""
    if dtype in FLOAT_DTYPES:
        return dtype
    return {"bool": "float16", "int8": "float16", "uint8": "float16", "int16": "float32"}.get(
        dtype, "float64"
    )


def broadcast_shapes(a: Sequence[Dim], b: Sequence[Dim], location: SourceLocation | None) -> tuple[Dim, ...]:
    """numpy broadcasting over concrete and symbolic extents."""
    out: list[Dim] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise TileShapeError(
                f"shapes {tuple(a)} and {tuple(b)} do not broadcast (axis -{i}: {x} vs {y})",
                hint="numpy broadcasting: trailing axes must be equal or 1; "
                "symbolic sizes must have the same name",
                location=location,
            )
    return tuple(reversed(out))


def _normalize_axes(
    axis: int | Sequence[int] | None, ndim: int, location: SourceLocation | None
) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for ax in axes:
        if not isinstance(ax, int) or not -ndim <= ax < ndim:
            raise TileShapeError(
                f"axis {ax!r} is out of range for a {ndim}-d array",
                hint=f"use -{ndim}..{ndim - 1}",
                location=location,
            )
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise TileShapeError(f"axis {axis!r} repeats an axis", location=location)
    return tuple(sorted(out))


def _binary_operator(fn: str) -> tuple[Callable[[Array, Any], Array], Callable[[Array, Any], Array]]:
    """``Array``'s operator for ``fn`` and its reflected twin (``a + 2``, ``2 + a``)."""

    def forward(self: Array, other: Any) -> Array:
        return binary(fn, self, other)

    def reflected(self: Array, other: Any) -> Array:
        return binary(fn, other, self)

    return forward, reflected


def _reduction_method(kind: str) -> Callable[..., Array]:
    """``Array.sum`` and friends: ``a.max(axis=-1, keepdims=True)`` as numpy spells it."""

    def method(self: Array, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
        return reduce(kind, self, axis, keepdims)

    method.__name__ = kind
    return method


class Array:
    """A traced array inside a ``@tb.jit`` function (shape and dtype known while tracing)."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our reflected operators

    def __init__(self, node: Node) -> None:
        self._node = node

    # -- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[Dim, ...]:
        return self._node.shape

    @property
    def ndim(self) -> int:
        return self._node.ndim

    @property
    def dtype(self) -> str:
        return self._node.dtype

    @property
    def size(self) -> Dim:
        if all(isinstance(d, int) for d in self.shape):
            return math.prod(int(d) for d in self.shape)
        raise BeginnerError(
            "the size of an array with symbolic extents is not a number", location=call_site()
        )

    def __repr__(self) -> str:
        return f"tb.Array(shape={self.shape}, dtype={self.dtype})"

    # -- what is not supported -------------------------------------------------------------
    def __bool__(self) -> bool:
        raise BeginnerError(
            "a traced array has no truth value: Python `if`/`while` on array values is not traced",
            hint="use tb.where(cond, a, b) for element-wise choices",
            location=call_site(),
        )

    def __getitem__(self, index: Any) -> Array:
        raise BeginnerError(
            "indexing and slicing traced arrays is not supported in the beginner tier",
            hint=f"supported: {SUPPORTED}; write a developer-tier kernel (tile.lang.language) for indexing",
            location=call_site(),
        )

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise BeginnerError(
            "a traced array cannot be converted to numpy inside a @tb.jit function",
            hint="use the tb.* functions instead of np.* on traced arrays",
            location=call_site(),
        )

    def __iter__(self) -> Any:
        raise BeginnerError("iterating over a traced array is not supported", location=call_site())

    def __getattr__(self, name: str) -> Any:
        raise BeginnerError(
            f"traced arrays have no attribute {name!r}", hint=f"supported: {SUPPORTED}", location=call_site()
        )

    # -- arithmetic ------------------------------------------------------------------------
    __add__, __radd__ = _binary_operator("add")
    __sub__, __rsub__ = _binary_operator("sub")
    __mul__, __rmul__ = _binary_operator("mul")
    __truediv__, __rtruediv__ = _binary_operator("div")
    __pow__, __rpow__ = _binary_operator("pow")

    def __neg__(self) -> Array:
        return unary("neg", self)

    def __pos__(self) -> Array:
        return self

    def __abs__(self) -> Array:
        return unary("abs", self)

    __lt__ = _binary_operator("lt")[0]
    __le__ = _binary_operator("le")[0]
    __gt__ = _binary_operator("gt")[0]
    __ge__ = _binary_operator("ge")[0]

    def __eq__(self, other: Any) -> Array:  # type: ignore[override]
        return binary("eq", self, other)

    def __ne__(self, other: Any) -> Array:  # type: ignore[override]
        return binary("ne", self, other)

    __hash__ = object.__hash__

    def __matmul__(self, other: Any) -> Array:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Array:
        return matmul(other, self)

    # -- methods ---------------------------------------------------------------------------
    def astype(self, dtype: Any) -> Array:
        return cast(self, dtype)

    @property
    def T(self) -> Array:
        return transpose(self)

    @property
    def mT(self) -> Array:
        if self.ndim < 2:
            raise TileShapeError(".mT needs at least 2 dimensions", location=call_site())
        perm = (*range(self.ndim - 2), self.ndim - 1, self.ndim - 2)
        return transpose(self, perm)

    def transpose(self, *axes: Any) -> Array:
        perm = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return transpose(self, tuple(perm) if perm else None)

    sum = _reduction_method("sum")
    max = _reduction_method("max")
    min = _reduction_method("min")
    mean = _reduction_method("mean")


def _node(op: str, inputs: Sequence[Node], shape: Sequence[Dim], dtype: str, **attrs: Any) -> Array:
    return Array(Node(op, tuple(inputs), tuple(shape), dtype, attrs, call_site()))


def _as_array(value: Any, like_dtype: str | None = None) -> tuple[Array | None, Any]:
    """(array, None) for traced arrays, (None, scalar) for Python/numpy scalars."""
    if isinstance(value, Array):
        return value, None
    if isinstance(value, bool | int | float | np.generic) and np.ndim(value) == 0:
        return None, value.item() if isinstance(value, np.generic) else value
    raise BeginnerError(
        f"cannot use a {type(value).__name__} in a traced expression",
        hint="pass arrays as arguments of the @tb.jit function; constants must be Python numbers",
        location=call_site(),
    )


def const(value: float | int | bool, dtype: str) -> Node:
    return Node("const", (), (), dtype, {"value": value}, call_site())


def binary(fn: str, a: Any, b: Any) -> Array:
    x, xs = _as_array(a)
    y, ys = _as_array(b)
    loc = call_site()
    if x is None and y is None:
        raise BeginnerError("at least one operand must be a traced array", location=loc)
    if x is not None and y is not None:
        dtype = _promote(x.dtype, y.dtype)
        shape = broadcast_shapes(x.shape, y.shape, loc)
        left, right = x._node, y._node
    elif x is not None:
        dtype = _promote_scalar(x.dtype, ys)
        shape = x.shape
        left, right = x._node, const(ys, dtype)
    else:
        assert y is not None
        dtype = _promote_scalar(y.dtype, xs)
        shape = y.shape
        left, right = const(xs, dtype), y._node
    if fn == "div" and dtype not in FLOAT_DTYPES:
        dtype = "float64" if dtype in ("int32", "int64", "uint32", "int16") else "float32"
    if fn in COMPARISON:
        return _node("binary", (left, right), shape, "bool", fn=fn, operand_dtype=dtype)
    return _node("binary", (left, right), shape, dtype, fn=fn)


def unary(fn: str, a: Any) -> Array:
    x, _ = _as_array(a)
    if x is None:
        raise BeginnerError(f"tb.{fn} takes a traced array", location=call_site())
    dtype = x.dtype if fn in ("neg", "abs", "relu") else _float_of(x.dtype)
    return _node("unary", (x._node,), x.shape, dtype, fn=fn)


def where(cond: Any, a: Any, b: Any) -> Array:
    c, _ = _as_array(cond)
    if c is None or c.dtype != "bool":
        raise BeginnerError("tb.where needs a boolean array condition (a comparison)", location=call_site())
    x, xs = _as_array(a)
    y, ys = _as_array(b)
    loc = call_site()
    if x is not None and y is not None:
        dtype = _promote(x.dtype, y.dtype)
    elif x is not None:
        dtype = _promote_scalar(x.dtype, ys)
    elif y is not None:
        dtype = _promote_scalar(y.dtype, xs)
    else:
        dtype = str(np.result_type(xs, ys))
    left = x._node if x is not None else const(xs, dtype)
    right = y._node if y is not None else const(ys, dtype)
    shape = broadcast_shapes(broadcast_shapes(c.shape, left.shape, loc), right.shape, loc)
    return _node("where", (c._node, left, right), shape, dtype)


def cast(a: Array, dtype: Any) -> Array:
    name = normalize_dtype(dtype)
    if name == a.dtype:
        return a
    return _node("cast", (a._node,), a.shape, name)


def transpose(a: Array, perm: Sequence[int] | None = None) -> Array:
    loc = call_site()
    axes = tuple(reversed(range(a.ndim))) if perm is None else tuple(int(p) % max(a.ndim, 1) for p in perm)
    if sorted(axes) != list(range(a.ndim)):
        raise TileShapeError(f"{tuple(perm or ())} is not a permutation of {a.ndim} axes", location=loc)
    if axes == tuple(range(a.ndim)):
        return a
    source = a._node
    if source.op == "transpose":  # x.T.T: one permutation of the original
        axes = tuple(source.attrs["perm"][p] for p in axes)
        source = source.inputs[0]
        if axes == tuple(range(a.ndim)):
            return Array(source)
    return _node("transpose", (source,), tuple(source.shape[p] for p in axes), a.dtype, perm=axes)


def reduce(kind: str, a: Array, axis: int | Sequence[int] | None, keepdims: bool) -> Array:
    loc = call_site()
    axes = _normalize_axes(axis, a.ndim, loc)
    if kind == "sum":
        dtype = a.dtype if a.dtype in FLOAT_DTYPES else ("int64" if a.dtype != "uint64" else "uint64")
    elif kind == "mean":
        dtype = _float_of(a.dtype) if a.dtype not in FLOAT_DTYPES else a.dtype
    else:
        dtype = a.dtype
    shape = tuple((1 if i in axes else d) for i, d in enumerate(a.shape) if keepdims or i not in axes)
    return _node("reduce", (a._node,), shape, dtype, kind=kind, axes=axes, keepdims=bool(keepdims))


def matmul(a: Any, b: Any) -> Array:
    x, _ = _as_array(a)
    y, _ = _as_array(b)
    loc = call_site()
    if x is None or y is None:
        raise BeginnerError("@ needs two traced arrays", location=loc)
    if x.ndim < 2 or y.ndim < 2:
        raise TileShapeError(
            f"@ of shapes {x.shape} and {y.shape}: both operands need at least 2 dimensions here",
            hint="reshape vectors to (1, n) or (n, 1) before calling the function",
            location=loc,
        )
    if x.shape[-1] != y.shape[-2]:
        raise TileShapeError(
            f"@ of shapes {x.shape} and {y.shape}: K of the left is {x.shape[-1]}, "
            f"K of the right is {y.shape[-2]}",
            hint="the last axis of the left operand must equal the second-to-last of the right",
            location=loc,
        )
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2], loc)
    dtype = _promote(x.dtype, y.dtype)
    if dtype not in FLOAT_DTYPES:
        raise BeginnerError(
            f"@ of {dtype} arrays is not supported", hint="cast to a float dtype first", location=loc
        )
    return _node("matmul", (x._node, y._node), (*batch, x.shape[-2], y.shape[-1]), dtype)
