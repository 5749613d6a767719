"""The eager front end: ``@tilelang.jit`` on a kernel body, called with tensors.

An eager kernel is one function: its tensor parameters are declared in the body
(``A: T.Tensor((M, K), dtype)``) or typed by the tensors it is called with, dims
come from ``T.const("M, K")`` (bound from the arguments' shapes) or
``T.dynamic("M")`` (kept symbolic), outputs are allocated with ``T.empty`` and
returned. Other parameters (block sizes, dtypes) are compile-time Python values.

Calling the function compiles it on first use for each set of static dims, dtypes
and compile-time values, then runs it::

    @tilelang.jit
    def add(A, B, block: int = 32):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), "float32")
        B: T.Tensor((M, N), "float32")
        C = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i, j in T.Parallel(block, N):
                C[bx * block + i, j] = A[bx * block + i, j] + B[bx * block + i, j]
        return C

    c = add(a, b)

How it works: the body is parsed as a ``@T.prim_func`` after a line-preserving AST
rewrite (parameters removed, body annotations become declarations, ``return``
records the outputs). ``T.const`` dims parse as variables that are then
specialized to the values the call's tensors have.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.script.ir_builder.ir import meta_var  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.errors import TileError

from ..errors import KernelArgumentError, TileParseError, TileScopeError, TileTypeError
from .arguments import element_strides as _element_strides
from .arguments import is_torch_tensor, logical_layout
from .dtypes import Tensor, shape_list
from .kernel_sequence import scratch_count
from .session import ChainedAssignRewriter, current_session, parse_kernel
from .symbolic import split_names
from .tracebacks import api_boundary

_DECLARE = "__tile_declare__"
_RETURN = "__tile_return__"
_PRIM_FUNC = "__tile_prim_func__"
_PYTHON = "__tile_python_value__"
_PYTHON_ASSERT = "__tile_python_assert__"


def _parallel_assignment(stmt: ast.stmt) -> bool:
    """``a, b = x, y``: names on the left, as many values on the right."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return False
    target, value = stmt.targets[0], stmt.value
    return (
        isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        and all(isinstance(t, ast.Name) for t in target.elts)
        and not any(isinstance(v, ast.Starred) for v in value.elts)
    )


def _is_python_scalar(value: Any) -> bool:
    alias = isinstance(value, tirx.Var) and not tirx.is_buffer_var(value)  # another name for a dim
    constant = isinstance(value, tirx.IntImm)  # a static dim (A.shape[0])
    return alias or constant or value is None or isinstance(value, bool | int | float | str)


def _python_value(value: Any, name: str | tuple[str, ...] | None = None) -> Any:
    """A number, string or ``None`` assigned to ``name`` before ``T.Kernel`` stays a Python value
    (TVMScript would make it a runtime scalar), and may be assigned again (``if out_dtype ==
    T.int32: micro_size_k = 32``): TileLang's eager bodies compute tile sizes and scopes there.
    ``M, N = A.shape`` (``name`` a tuple) binds each dim so."""
    names = name if isinstance(name, tuple) else (name,)
    if isinstance(name, tuple):
        items = list(value) if isinstance(value, list | tuple | ir.Array) else None
        if items is None or len(items) != len(name) or not all(_is_python_scalar(v) for v in items):
            return value
    elif not _is_python_scalar(value):
        return value
    table = getattr(current_session("an eager kernel").parser, "var_table", None)
    for one in names:
        if one is not None and table is not None and table.frames and one in table.frames[-1].vars:
            # Python rebinds; TVMScript refuses a second definition in one scope: drop the first
            table.frames[-1].vars.discard(one)
            table.name2value[one].pop()
    if isinstance(name, tuple):
        return tuple(meta_var(v) for v in items)  # type: ignore[union-attr]
    return meta_var(value)


def _python_assert(condition: Any, message: Any = None) -> None:
    """``assert`` before ``T.Kernel`` checks the arguments in Python, at compile time; one on a
    runtime value (a ``T.dynamic`` dim) stays the kernel's runtime check, as TVMScript makes it."""
    if isinstance(condition, ir.Expr) and not isinstance(condition, tirx.IntImm):
        frame = B.Assert(condition, "" if message is None else str(message))
        frame.add_callback(functools.partial(frame.__exit__, None, None, None))
        frame.__enter__()
        return
    if not bool(condition.value if isinstance(condition, tirx.IntImm) else condition):
        raise KernelAssertionError(
            str(message) if message is not None else "the kernel's assert before T.Kernel failed",
            hint="call the kernel with arguments its assert accepts",
        )


PRELUDE_BUILTINS = {_PYTHON: _python_value, _PYTHON_ASSERT: _python_assert}
"""The names ``python_prelude``'s statements call, to put in the parser's scope."""


class KernelAssertionError(TileTypeError, AssertionError):
    """An eager kernel's own ``assert`` before ``T.Kernel`` failed (an ``AssertionError`` too,
    as in TileLang, located at the assert)."""


@dataclasses.dataclass
class _EagerCall:
    """What one eager parse knows and records."""

    tensors: dict[str, Any]
    const_values: dict[str, int] | None = None
    """``None`` while discovering the ``T.const`` values, then the values."""
    const_vars: list[Any] = dataclasses.field(default_factory=list)
    declared: dict[str, Any] = dataclasses.field(default_factory=dict)
    outputs: list[Any] = dataclasses.field(default_factory=list)
    returned: list[Any] | None = None
    returns_tuple: bool = False


_calls: list[_EagerCall] = []


def _current(construct: str) -> _EagerCall:
    if not _calls:
        raise TileScopeError(
            f"{construct} is only available in an eager kernel",
            hint="decorate the function with @tilelang.jit and call it with tensors "
            "(in a @T.prim_func, declare outputs as parameters instead)",
        )
    return _calls[-1]


def const(names: str) -> Any:
    """``M, N = T.const("M, N")``: dims bound from the shapes of the call's tensors.

    The kernel is specialized to the bound values (one compiled kernel per distinct
    set of shapes); use ``T.dynamic`` for a dim that should stay symbolic.
    """
    call = _current("T.const")
    result: list[Any] = []
    for name in split_names(names):
        if call.const_values is not None and name in call.const_values:
            # meta_var: the parser binds the name to the Python int (not a scalar variable)
            result.append(meta_var(call.const_values[name]))
        else:
            var = tirx.Var(name, "int32")
            call.const_vars.append(var)
            result.append(var)
    return result[0] if len(result) == 1 else tuple(result)


def empty(*shape: Any, dtype: Any = "float32") -> Any:
    """``C = T.empty((M, N), dtype)``: an output tensor, allocated at each call and returned.

    The shape is one tuple (``T.empty((M, N), dtype)``, ``T.empty(A.shape, dtype=A.dtype)``)
    or the dims one by one with the dtype by keyword (``T.empty(M, N, dtype=A.dtype)``).
    """
    call = _current("T.empty")
    if shape and not isinstance(shape[0], int | ir.Expr):  # T.empty((M, N)[, dtype])
        if len(shape) > 2:
            raise TileTypeError(
                f"T.empty takes a shape and a dtype, got {len(shape)} arguments",
                hint="write T.empty((M, N), dtype) or T.empty(M, N, dtype=...)",
            )
        shape, dtype = tuple(shape[0]), (shape[1] if len(shape) == 2 else dtype)
    if not shape:
        raise TileTypeError(
            "T.empty needs a shape", hint="write T.empty((M, N), dtype) or T.empty(M, N, dtype=...)"
        )
    dims = shape_list(shape)
    name = f"out{len(call.outputs)}"
    param = B.arg(name, Tensor(dims, dtype))
    call.outputs.append(param)
    return param


def _declare(name: str, annotation: Any) -> Any:
    """A tensor parameter, typed by its annotation or by the tensor passed for it."""
    call = _current("a tensor declaration")
    if name in call.declared:
        raise TileParseError(f"tensor parameter {name} is declared twice")
    value = call.tensors[name]
    if annotation is None:
        annotation = Tensor(tuple(int(d) for d in value.shape), _value_dtype(value))
    elif not tirx.is_buffer_var(annotation):
        raise TileTypeError(
            f"parameter {name} is a tensor, but its annotation is {annotation!r}",
            hint=f"annotate it as {name}: T.Tensor((M, N), dtype)",
        )
    param = B.arg(name, annotation)
    call.declared[name] = param
    if call.const_values is None and len(call.declared) == len(call.tensors):
        raise _DiscoveryDone("internal: tensor parameters declared")
    return param


class _DiscoveryDone(TileError):
    """Internal: every tensor parameter is declared, so the ``T.const`` values are known."""


def _record_return(value: Any) -> None:
    call = _current("return")
    values = list(value) if isinstance(value, list | tuple) else [value]
    for item in values:
        if not tirx.is_buffer_var(item):
            raise TileTypeError(
                f"an eager kernel returns tensors made by T.empty, got {type(item).__name__}",
                hint="return the outputs, e.g. `return C` or `return C, D`",
            )
        if not any(item.same_as(out) for out in call.outputs):
            raise TileTypeError(
                f"returned tensor {item.name} was not made by T.empty",
                hint="only T.empty outputs can be returned; inputs are written in place",
            )
    call.returned = values
    call.returns_tuple = isinstance(value, list | tuple)


def _value_dtype(value: Any) -> str:
    if is_torch_tensor(value):
        return str(value.dtype).removeprefix("torch.")
    return str(value.dtype)


def is_tensor_value(value: object) -> bool:
    """Whether a call argument is a tensor (numpy array or torch tensor, or the ``T.Tensor``
    prototype ``get_tir`` takes)."""
    return isinstance(value, np.ndarray | _Prototype) or is_torch_tensor(value)


@dataclasses.dataclass(frozen=True)
class _Prototype:
    """A ``T.Tensor((M, N), dtype)`` passed for a tensor argument (``get_tir``): its shape and
    dtype, row-major."""

    shape: tuple[int, ...]
    dtype: str
    itemsize: int = 1

    @property
    def strides(self) -> tuple[int, ...]:
        steps, step = [], 1
        for dim in reversed(self.shape):
            steps.append(step)
            step *= dim
        return tuple(reversed(steps))

    @classmethod
    def of(cls, value: Any) -> Any:
        if not tirx.is_buffer_var(value):
            return value
        try:
            shape = tuple(int(d) for d in value.shape)
        except TypeError:
            raise TileTypeError(
                f"get_tir takes T.Tensor prototypes of static shape, got {list(value.shape)}",
                hint="pass T.Tensor((128, 128), dtype) or a tensor",
            ) from None
        return cls(shape, str(value.dtype))


def tensor_signature(value: Any) -> tuple[Any, ...]:
    """What a kernel specialized for ``value`` depends on: dtype, shape, strides (in elements)
    and device; two tensors with the same signature run the same kernels."""
    device = str(value.device) if is_torch_tensor(value) else "cpu"
    shape = tuple(int(d) for d in value.shape)
    return ("tensor", _value_dtype(value), shape, _element_strides(value), device)


def _function_node(tree: ast.Module) -> ast.FunctionDef:
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TileParseError("@tilelang.jit expects a function definition")
    return node


def is_eager_function(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is a kernel body (eager style) rather than a kernel factory.

    A body has a top-level ``with T.Kernel(...)``, calls ``T.const``/``T.empty``, or
    declares a parameter's type (``A: T.Tensor[[128, 128], T.float32]``, in the body or the
    signature; a macro may open the kernel).
    """
    try:
        node = _function_node(ast.parse(textwrap.dedent(inspect.getsource(fn))))
    except (OSError, TypeError, SyntaxError, TileParseError):
        return False
    params = {a.arg for a in node.args.args}
    if any(_names_a_tensor(a.annotation) for a in node.args.args):
        return True
    for stmt in node.body:
        if opens_kernel(stmt):
            return True
        if _declares_parameter(stmt, params):
            return True
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.FunctionDef):
                break
            if isinstance(sub, ast.Call) and _callee_name(sub) in ("const", "empty"):
                return True
    return False


def python_prelude(body: list[ast.stmt]) -> list[ast.stmt]:
    """Before ``with T.Kernel``: ``name = value`` keeps Python values and ``assert`` runs in
    Python, as in TileLang's eager bodies and macros (TVMScript would emit runtime scalars and
    asserts). The rewritten statements call the functions of ``PRELUDE_BUILTINS``."""

    def call(name: str, args: list[ast.expr], where: ast.AST) -> ast.Call:
        callee = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), where)
        return ast.copy_location(ast.Call(func=callee, args=args, keywords=[]), where)

    out: list[ast.stmt] = []
    for index, stmt in enumerate(body):
        if opens_kernel(stmt):
            return out + body[index:]
        if isinstance(stmt, ast.Assign) and [type(t) for t in stmt.targets] == [ast.Name]:
            name = ast.copy_location(ast.Constant(value=stmt.targets[0].id), stmt.value)  # type: ignore[attr-defined]
            stmt.value = call(_PYTHON, [stmt.value, name], stmt.value)
        elif _unpacking(stmt):  # M, N = A.shape: each dim a Python value
            assert isinstance(stmt, ast.Assign)
            names = tuple(t.id for t in stmt.targets[0].elts)  # type: ignore[attr-defined]
            names_node = ast.copy_location(ast.Constant(value=names), stmt.value)  # type: ignore[arg-type]
            stmt.value = call(_PYTHON, [stmt.value, names_node], stmt.value)
        elif _parallel_assignment(stmt):  # KH, KW = K, K: one assignment per name
            assert isinstance(stmt, ast.Assign)
            targets, values = stmt.targets[0].elts, stmt.value.elts  # type: ignore[attr-defined]
            for target, value in zip(targets, values, strict=True):
                name = ast.copy_location(ast.Constant(value=target.id), value)
                single = ast.Assign(targets=[target], value=call(_PYTHON, [value, name], value))
                out.append(ast.copy_location(single, stmt))
            continue
        elif isinstance(stmt, ast.If):  # Python control flow over the configuration
            stmt.body = python_prelude(stmt.body)
            stmt.orelse = python_prelude(stmt.orelse)
        elif isinstance(stmt, ast.Assert):
            args = [stmt.test] + ([stmt.msg] if stmt.msg is not None else [])
            stmt = ast.copy_location(ast.Expr(value=call(_PYTHON_ASSERT, args, stmt)), stmt)
        out.append(stmt)
    return out


def _unpacking(stmt: ast.stmt) -> bool:
    """``a, b = value``: names on the left, one value (not a tuple display) on the right."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Tuple)
        and all(isinstance(t, ast.Name) for t in stmt.targets[0].elts)
        and not isinstance(stmt.value, ast.Tuple)
    )


def _declares_parameter(stmt: ast.stmt, params: set[str]) -> bool:
    """``A: T.Tensor(...)`` with no value, ``A`` a parameter."""
    target = stmt.target if isinstance(stmt, ast.AnnAssign) and stmt.value is None else None
    return isinstance(target, ast.Name) and target.id in params


def _names_a_tensor(annotation: ast.expr | None) -> bool:
    """``T.Tensor(...)``, ``T.Tensor[...]``, ``T.StridedTensor[...]``: a tensor type."""
    while isinstance(annotation, ast.Subscript | ast.Call):
        annotation = annotation.value if isinstance(annotation, ast.Subscript) else annotation.func
    name = annotation.attr if isinstance(annotation, ast.Attribute) else getattr(annotation, "id", "")
    return str(name).endswith("Tensor")


def opens_kernel(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is ``with T.Kernel(...)``."""
    return isinstance(stmt, ast.With) and any(
        isinstance(item.context_expr, ast.Call) and _callee_name(item.context_expr) == "Kernel"
        for item in stmt.items
    )


def _callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


class _Rewriter:
    """The line-preserving AST rewrite that makes an eager body a prim_func."""

    def __init__(self, tensor_names: Sequence[str]) -> None:
        self.tensor_names = list(tensor_names)

    def __call__(self, tree: ast.Module) -> ast.Module:
        node = _function_node(tree)
        signature_ann = {a.arg: a.annotation for a in node.args.args}
        declared_in_body = {
            s.target.id
            for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is None
        }
        prelude: list[ast.stmt] = []
        for name in self.tensor_names:
            if name in declared_in_body:
                continue
            ann = signature_ann.get(name)
            prelude.append(self._declaration(name, ann, node))
        body: list[ast.stmt] = []
        for stmt in node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is None
                and stmt.target.id in self.tensor_names
            ):
                body.append(self._declaration(stmt.target.id, stmt.annotation, stmt))
            else:
                body.append(stmt)
        node.body = self._strip_docstring(prelude, body)
        _ReturnRewriter().visit(node)
        ChainedAssignRewriter().visit(node)
        node.body = self._python_prelude(node.body)
        node.args = ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        )
        node.decorator_list = [ast.copy_location(ast.Name(id=_PRIM_FUNC, ctx=ast.Load()), node)]
        node.returns = None
        ast.fix_missing_locations(tree)
        return tree

    @staticmethod
    def _python_prelude(body: list[ast.stmt]) -> list[ast.stmt]:
        return python_prelude(body)

    @staticmethod
    def _strip_docstring(prelude: list[ast.stmt], body: list[ast.stmt]) -> list[ast.stmt]:
        doc = []
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            doc = [body.pop(0)]
        return doc + prelude + body

    @staticmethod
    def _declaration(name: str, annotation: ast.expr | None, where: ast.AST) -> ast.stmt:
        def located(node: Any) -> Any:
            return ast.copy_location(node, where)

        ann = annotation if annotation is not None else located(ast.Constant(value=None))
        callee = located(ast.Name(id=_DECLARE, ctx=ast.Load()))
        call = located(ast.Call(func=callee, args=[located(ast.Constant(value=name)), ann], keywords=[]))
        target = located(ast.Name(id=name, ctx=ast.Store()))
        return located(ast.Assign(targets=[target], value=call))


class _ReturnRewriter(ast.NodeTransformer):
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.body = [self.visit(s) for s in node.body]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        value = node.value if node.value is not None else ast.Constant(value=None)
        call = ast.Call(func=ast.Name(id=_RETURN, ctx=ast.Load()), args=[value], keywords=[])
        return ast.copy_location(ast.Expr(value=ast.copy_location(call, node)), node)


def _prim_func_token(fn: Any) -> Any:
    return fn


_prim_func_token.dispatch_token = "tirx"  # type: ignore[attr-defined]


def _bind_one(call: _EagerCall, values: dict[str, int], dim: Any, got: int, where: str) -> None:
    var = next((v for v in call.const_vars if dim.same_as(v)), None)
    if var is None:
        return
    previous = values.setdefault(str(var.name), got)
    if previous != got:
        raise KernelArgumentError(
            f"dim {var.name} is {previous} in one argument but {got} in {where}",
            hint="tensors that share a T.const dim must agree on its size",
        )


def _bind_consts(call: _EagerCall, order: list[str]) -> dict[str, int]:
    """Values of the ``T.const`` dims from the tensors passed for the declared parameters."""
    values: dict[str, int] = {}
    for name in order:
        param = call.declared[name]
        actual, steps = logical_layout(str(param.dtype), call.tensors[name])
        if len(actual) != len(param.shape):
            raise KernelArgumentError(
                f"argument {name} has shape {list(actual)}, but the kernel declares {list(param.shape)}",
                hint="pass a tensor with as many dims as the declaration",
            )
        for dim, got in zip(param.shape, actual, strict=True):
            if isinstance(dim, tirx.IntImm) and int(dim.value) != got:
                raise KernelArgumentError(
                    f"argument {name} has shape {list(actual)}, but the kernel declares {list(param.shape)}",
                    hint="pass a tensor of the declared shape",
                )
            _bind_one(call, values, dim, got, f"{name} (shape {list(actual)})")
        if len(param.strides):  # T.StridedTensor: its T.const strides from the tensor's
            for dim, got in zip(param.strides, steps, strict=False):
                _bind_one(call, values, dim, got, f"{name} (strides {list(steps)})")
    unbound = [str(v.name) for v in call.const_vars if str(v.name) not in values]
    if unbound:
        raise TileTypeError(
            f"T.const dims {unbound} are not a dimension of any tensor parameter",
            hint="use each T.const dim directly in a tensor annotation, e.g. A: T.Tensor((M, K), dtype)",
        )
    return values


@dataclasses.dataclass
class _Compiled:
    kernel: Any
    inputs: list[str]
    returned: int
    returns_tuple: bool

    def accepts(self, tensors: dict[str, Any]) -> bool:
        for index, name in enumerate(self.inputs):
            spec = self.kernel.params[index]
            shape, steps = logical_layout(spec.dtype, tensors[name])
            if len(shape) != len(spec.shape or ()):
                return False
            if any(isinstance(w, int) and w != g for w, g in zip(spec.shape or (), shape, strict=True)):
                return False
            if spec.strides is not None and any(
                isinstance(w, int) and w != g for w, g in zip(spec.strides, steps, strict=False)
            ):
                return False
        return True

    def run(self, tensors: dict[str, Any]) -> Any:
        result = self.kernel(*[tensors[name] for name in self.inputs])
        outs = list(result) if isinstance(result, tuple) else ([] if result is None else [result])
        outs = outs[: self.returned]
        if not self.returns_tuple:
            return outs[0] if outs else None
        return tuple(outs)


def _is_pointer_placeholder(value: Any) -> bool:
    """``T.ptr()`` passed for a parameter ahead of a call: a handle variable, no value."""
    if not isinstance(value, ir.Var) or tirx.is_buffer_var(value):
        return False
    return str(getattr(value, "ty", "")) == "T.handle"


class EagerKernel:
    """An eager kernel body: call it with tensors (and compile-time values).

    ``kernels`` holds every specialization compiled so far; ``get_kernel(*args)``
    returns the ``JITKernel`` a call with these arguments runs.
    """

    __test__ = False  # named test_*, a kernel still is no test for pytest to collect

    def __init__(
        self,
        fn: Callable[..., Any],
        compile_fn: Callable[..., Any],
        target: Any = "auto",
        options: dict[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self._compile = compile_fn
        self.target = target
        """The ``@jit`` target and compile options (``@autotune`` compiles its candidates with them)."""
        self.options = dict(options or {})
        self.signature = inspect.signature(fn)
        self._cache: dict[Any, list[_Compiled]] = {}
        functools.update_wrapper(self, fn)

    @property
    def kernels(self) -> list[Any]:
        return [c.kernel for entries in self._cache.values() for c in entries]

    def split(self, args: Any, kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """A call's arguments by name: ``(tensors, compile-time values)``, defaults applied."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise KernelArgumentError(
                f"{self.fn.__name__}: {exc}", hint=f"signature: {self.signature}"
            ) from None
        bound.apply_defaults()
        tensors: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            (tensors if is_tensor_value(value) else values)[name] = value
        return tensors, values

    def _key(self, tensors: dict[str, Any], values: dict[str, Any]) -> Any:
        shape_free = tuple((n, _value_dtype(v), len(v.shape)) for n, v in tensors.items())
        try:
            key = (shape_free, tuple(sorted(values.items(), key=lambda kv: kv[0])))
            hash(key)
        except TypeError:
            return None
        return key

    def _select(self, *args: Any, **kwargs: Any) -> tuple[_Compiled, dict[str, Any]]:
        tensors, values = self.split(args, kwargs)
        key = self._key(tensors, values)
        for entry in self._cache.get(key, []) if key is not None else []:
            if entry.accepts(tensors):
                return entry, tensors
        entry = self._build(tensors, values)
        if key is not None:
            self._cache.setdefault(key, []).append(entry)
        return entry, tensors

    @api_boundary
    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The ``PrimFunc`` a call with these arguments compiles (TileLang's ``get_tir``); a
        tensor argument may be a ``T.Tensor((M, N), dtype)`` prototype instead of a tensor."""
        if not args and not any(hasattr(v, "shape") for v in kwargs.values()):
            # the config alone (TileLang's examples/analyze: get_tir(block_M=128, ...)): the
            # tensors are the parameters not named, shaped by their T.Tensor annotations
            return self.specialize_ahead(kwargs).prim_func(self.fn.__name__)[0]
        args = tuple(_Prototype.of(a) for a in args)
        kwargs = {k: _Prototype.of(v) for k, v in kwargs.items()}
        return self.specialize(*self.split(args, kwargs)).prim_func(self.fn.__name__)[0]

    @api_boundary
    def get_kernel(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled ``JITKernel`` that ``self(*args, **kwargs)`` runs (compiling it if needed)."""
        return self._select(*args, **kwargs)[0].kernel

    @api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        entry, tensors = self._select(*args, **kwargs)
        return entry.run(tensors)

    def get_kernel_source(self, *args: Any, kind: str | None = None, **values: Any) -> str:
        """The compiled source of ``self.compile(...)`` with the same arguments (TileLang's
        ``fn.get_kernel_source(M=..., N=...)``, or ``fn.get_kernel_source(a, b, n)`` with a
        call's arguments). A lone string argument is the kind of source, as before."""
        if len(args) == 1 and isinstance(args[0], str) and kind is None:
            kind, args = args[0], ()
        return str(self.compile(*args, **values).get_kernel_source(kind))

    def compile(self, *args: Any, **values: Any) -> CompiledEagerKernel:
        """Compile ahead of any call from the ``T.const`` dims and the other non-tensor
        arguments, by name (TileLang's ``kernel = matmul.compile(M=1024, N=1024, ...)``), or
        for the arguments of a call (``fn.compile(a, b, n)``: tensors and values, as
        ``fn(a, b, n)`` takes them; TileLang's mHC examples).

        By name, the tensor parameters are those not named; each needs its ``T.Tensor``
        annotation. The result is called with the tensors, in parameter order.
        """
        if args:
            return CompiledEagerKernel(self._select(*args, **values)[0])
        return CompiledEagerKernel(self.finish(self.specialize_ahead(values)))

    def par_compile(
        self, configs: Sequence[Any], num_workers: int | None = None, ignore_error: bool = False
    ) -> list[Any]:
        """``compile(**config)`` for each config, in order (TileLang's eager kernels have it; a
        tensor parameter may be a ``T.Tensor`` prototype). One after another (``num_workers`` is
        accepted and unused); with ``ignore_error=True`` a config that fails gives ``None``.

        A config that passes ``T.ptr()`` for a parameter (the body makes the tensor with
        ``T.make_tensor``, whose shape only a call gives) is not compiled ahead: ``None`` in
        its place, and the kernel compiles at the first call with tensors."""
        del num_workers
        from .jit import _compile_each

        def one(config: Any) -> Any:
            if any(_is_pointer_placeholder(v) for v in config.values()):
                return None
            return self.compile(**config)

        return _compile_each(one, configs, ignore_error)

    def specialize_ahead(self, values: dict[str, Any]) -> Specialization:
        """The kernel ``compile(**values)`` builds, parsed and not compiled."""
        params = self.signature.parameters
        # a T.Tensor[(M, N), dtype] passed by name is a tensor parameter of that shape, as in get_tir
        prototypes = {k: _Prototype.of(v) for k, v in values.items() if k in params and tirx.is_buffer_var(v)}
        named = {k: v for k, v in values.items() if k in params and k not in prototypes}
        consts = {k: int(v) for k, v in values.items() if k not in params}
        tensor_names = [
            n for n, p in params.items() if n not in named and p.default is inspect.Parameter.empty
        ]
        for name, param in params.items():
            if name not in named and name not in tensor_names and name not in prototypes:
                named[name] = param.default
        tensors = {n: prototypes.get(n) for n in params if n in tensor_names or n in prototypes}
        call = _EagerCall(tensors=tensors, const_values=consts)
        func = self._parse(call, named)
        order = [name for name in params if name in call.declared]
        unbound = [str(v.name) for v in call.const_vars]
        if unbound:
            raise TileTypeError(
                f"{self.fn.__name__}.compile() needs a value for the T.const dims {unbound}",
                hint=f"pass them by name, e.g. {self.fn.__name__}.compile({unbound[0]}=1024, ...)",
            )
        return Specialization(call, order, func)

    def specialize(self, tensors: dict[str, Any], values: dict[str, Any]) -> Specialization:
        """The kernel a call with these tensors and compile-time values runs, parsed and not
        compiled (``split(args, kwargs)`` gives both)."""
        # Pass 1 parses up to the tensor declarations to learn the T.const values;
        # pass 2 parses the whole body with those dims as Python ints.
        discovery = _EagerCall(tensors=tensors)
        with contextlib.suppress(_DiscoveryDone):
            self._parse(discovery, values)
        order = [name for name in self.signature.parameters if name in discovery.declared]
        call = _EagerCall(tensors=tensors, const_values=_bind_consts(discovery, order))
        func = self._parse(call, values)
        _bind_consts(call, order)  # checks the static dims against the tensors
        return Specialization(call, order, func)

    def _parse(self, call: _EagerCall, values: dict[str, Any]) -> Any:
        extra = {**values, _DECLARE: _declare, _RETURN: _record_return, _PRIM_FUNC: _prim_func_token,
                 **PRELUDE_BUILTINS}  # fmt: skip
        _calls.append(call)
        try:
            return parse_kernel(self.fn, None, rewrite=_Rewriter(list(call.tensors)), extra_vars=extra)
        finally:
            _calls.pop()

    def _build(self, tensors: dict[str, Any], values: dict[str, Any]) -> _Compiled:
        return self.finish(self.specialize(tensors, values))

    def finish(self, spec: Specialization, compile_fn: Callable[..., Any] | None = None) -> _Compiled:
        """Compile ``spec`` (with ``compile_fn(func, out_idx)``, by default the ``@jit``'s)."""
        func, outputs = spec.prim_func(self.fn.__name__)
        kernel = (compile_fn or self._compile)(func, outputs)
        returned = spec.call.returned or []
        return _Compiled(kernel, spec.order, len(returned), spec.call.returns_tuple)


@dataclasses.dataclass
class Specialization:
    """An eager kernel parsed for one call: what it declared, its parameter order, its body."""

    call: _EagerCall
    order: list[str]
    """The tensor parameters, in call order."""
    func: Any

    def prim_func(self, name: str) -> tuple[Any, list[int]]:
        """The ``PrimFunc`` with its parameters in call order: the tensor parameters, then the
        returned outputs, then the other ``T.empty`` outputs, then any function-scope
        ``T.alloc_global`` scratch (which stays last, allocated per call); and the outputs'
        positions."""
        call = self.call
        returned = call.returned or []
        rest = [o for o in call.outputs if not any(o.same_as(r) for r in returned)]
        params = [call.declared[n] for n in self.order] + returned + rest
        outputs = list(range(len(self.order), len(params)))
        scratch = scratch_count(self.func)
        if scratch:
            params += list(self.func.params)[-scratch:]
        func = tirx.PrimFunc(params, self.func.body, self.func.ret_type, self.func.attrs)
        func.__name__ = name
        return func, outputs


class CompiledEagerKernel:
    """``EagerKernel.compile(...)``'s result: call it with the tensor arguments in order.

    Other attributes (``get_kernel_source``, ``get_profiler``, ...) are the compiled kernel's.
    """

    def __init__(self, entry: _Compiled) -> None:
        self._entry = entry
        self.kernel = entry.kernel

    def __call__(self, *tensors: Any) -> Any:
        if len(tensors) != len(self._entry.inputs):
            raise KernelArgumentError(
                f"expected {len(self._entry.inputs)} tensors ({', '.join(self._entry.inputs)}), "
                f"got {len(tensors)}",
                hint="pass the kernel's tensor parameters, in order; outputs are returned",
            )
        return self.run_named(dict(zip(self._entry.inputs, tensors, strict=True)))

    def run_named(self, tensors: dict[str, Any]) -> Any:
        """Run on the tensor arguments by parameter name (others are ignored)."""
        return self._entry.run(tensors)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_entry", "kernel"):
            raise AttributeError(name)
        return getattr(self.kernel, name)
