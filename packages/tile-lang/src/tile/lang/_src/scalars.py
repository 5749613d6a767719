"""Scalar variables, macros and plain loops inside kernels.

``T.alloc_var(dtype, init=)`` is a mutable scalar: read it in expressions, assign it
with ``x = ...`` or ``x += ...`` (the parser stores into its one-element buffer).
``T.macro`` inlines a Python function's body at each call while the kernel is
parsed; its arguments may be buffers, slices, expressions or Python values.
``T.serial(start, stop, step)`` is a sequential loop; Python ``for ... in range``,
``while`` and ``if``/``else`` work in kernels too.

Example::

    @T.macro
    def scale_row(dst, src, row, n):
        for j in T.Parallel(n):
            dst[row, j] = src[row, j] * 2.0

    with T.Kernel(1, threads=128) as bx:
        count = T.alloc_var("int32", init=0)
        while count < 4:
            scale_row(B, A, count, 64)
            count += 1
"""

from __future__ import annotations

import ast
import copy
import functools
import inspect
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.script.parser._core import scan_macro, utils  # type: ignore[import-untyped]
from tvm.script.parser.core import doc  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]
from tvm.tirx.script.parser.entry import TIRMacro  # type: ignore[import-untyped]

from ..errors import ArgumentValueError, TileScopeError, TileTypeError
from .dtypes import dtype_name
from .eager import PRELUDE_BUILTINS, opens_kernel, python_prelude
from .session import current_session

VAR_SCOPE = "local"
"""Scope of ``T.alloc_var`` storage: one register-like slot per block (per thread on GPUs)."""


def alloc_var(dtype: Any = "int32", init: Any = None, scope: str = VAR_SCOPE) -> Any:
    """A mutable scalar of ``dtype`` set to ``init``, zero without one (TileLang's rule).

    TileLang's other spellings work too: ``T.alloc_var("int32", "local.var")`` (a string in
    ``init``'s place is the scope) and ``T.alloc_var("int32", 1, "local.var")``."""
    if isinstance(init, str):
        init, scope = None, init
    session = current_session("T.alloc_var")
    if not session.kernels:
        raise TileScopeError(
            "T.alloc_var can only be used inside a `with T.Kernel(...)` block",
            hint="scalar variables live in a kernel's blocks",
        )
    name = dtype_name(dtype)
    _check_literal("T.alloc_var", name, init)
    scalar = B.alloc_scalar(dtype=name, scope=scope)
    if isinstance(init, int | float) and not isinstance(init, bool):
        init = tirx.const(init, name)  # in the variable's type (a float literal is float32 otherwise)
    if init is None:
        init = tirx.const(0, name)
    B.buffer_store(scalar.scalar.source, init, [0])
    return scalar


_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}


def _check_literal(construct: str, dtype: str, value: Any) -> None:
    """A Python number too large for ``dtype`` is an ``ArgumentValueError`` (a ``ValueError``)
    naming the line; infinities are representable and pass."""
    limit = _FLOAT_MAX.get(dtype)
    if limit is None or isinstance(value, bool) or not isinstance(value, int | float):
        return
    if abs(value) > limit and abs(value) != float("inf"):
        raise ArgumentValueError(
            f"{construct}: the literal {value!r} exceeds maximum of {dtype} ({limit:g})",
            hint="use a wider dtype (float64), or float('inf') if an infinity is meant",
        )


def serial(start: Any, stop: Any = None, step: Any = None, **kwargs: Any) -> Any:
    """``for i in T.serial(n)`` or ``T.serial(start, stop[, step])``: a sequential loop."""
    if step is not None:
        kwargs["step"] = step
    return B.serial(start, stop, **kwargs)


class Ref:
    """``x: T.Ref`` on a macro parameter: the macro gets a reference, not a value.

    Pass a buffer element (``A[i, j]``) or a ``T.alloc_var``; ``x = ...`` in the macro body
    stores into that element (as a C++ reference parameter would), and reading ``x`` reads
    it. ``T.Ref[T.float32]`` is accepted as the same annotation.
    """

    def __class_getitem__(cls, _item: Any) -> type[Ref]:
        return cls


def _is_ref(annotation: Any) -> bool:
    if annotation is Ref:
        return True
    if isinstance(annotation, str):  # ``from __future__ import annotations``
        head = annotation.split("[", 1)[0].strip()
        return head == "Ref" or head.endswith(".Ref")
    return False


def _reference(name: str, value: Any) -> Any:
    """A one-element view of the element ``value`` loads, sharing its memory."""
    if not isinstance(value, TensorLoad):
        raise TileTypeError(
            f"macro parameter {name!r} is a T.Ref, but the call passes {type(value).__name__} {value!r}",
            hint="pass a buffer element (A[i]) or a T.alloc_var to a T.Ref parameter",
        )
    buffer = value.source
    strides = list(buffer.strides) or None
    offset: Any = buffer.elem_offset
    if strides is None:
        flat: Any = 0
        for extent, index in zip(buffer.shape, value.indices, strict=True):
            flat = flat * extent + index
        offset = offset + flat
    else:
        for stride, index in zip(strides, value.indices, strict=True):
            offset = offset + index * stride
    view = B.decl_buffer([1], str(buffer.dtype), data=buffer.data, elem_offset=offset, scope=buffer.scope())
    return view[0]


class _Macro(TIRMacro):  # type: ignore[misc]
    """A TileLang macro: its last statement may be ``return value`` (the call gives that value,
    a ``T.empty`` output or an expression, to the caller; TVMScript would put a return
    statement into the kernel), and a macro that opens ``T.Kernel`` keeps the values it
    assigns before it as Python values (``M, N = A.shape``), as an eager kernel body does."""

    _definition: Any = None
    _trimmed: Any = None

    def get_macro_def(self) -> Any:
        if self._trimmed is not None:
            return self._trimmed
        if self._definition is None:
            tree = ast.parse(self.source.source)
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and any(opens_kernel(s) for s in node.body):
                    node.body = python_prelude(node.body)
            name = self.func.__name__
            found = [d for d in doc.to_doc(tree).body if isinstance(d, doc.FunctionDef) and d.name == name]
            self._definition = found[0] if found else super().get_macro_def()
        return self._definition

    def parse_macro(self, parser: Any) -> Any:
        for name, value in PRELUDE_BUILTINS.items():
            parser.var_table.add(name, value, allow_shadowing=True)
        definition = self.get_macro_def()
        last = definition.body[-1] if definition.body else None
        if not isinstance(last, doc.Return):
            return super().parse_macro(parser)
        self._trimmed = copy.copy(definition)
        self._trimmed.body = definition.body[:-1]
        try:
            super().parse_macro(parser)
        finally:
            self._trimmed = None
        return None if last.value is None else parser.eval_expr(last.value)


def _script_macro(func: Any, hygienic: bool) -> Any:
    source, closure_vars = scan_macro(func, utils.inspect_function_capture(func))
    # the macro's own names (parameters, assigned locals) shadow globals and captured names, as
    # in Python; TVM's macro puts both in one scope and refused the local one ("Variable k
    # already defined in current scope")
    own = {*func.__code__.co_varnames, *func.__code__.co_cellvars}
    closure_vars = {name: value for name, value in closure_vars.items() if name not in own}
    inlined = _Macro(source, closure_vars, func, hygienic)

    @functools.wraps(func)
    def call(*call_args: Any, **call_kwargs: Any) -> Any:
        return inlined(*call_args, **call_kwargs)

    return call


def macro(*args: Any, hygienic: bool = True) -> Any:
    """``@T.macro``: a function whose body is inlined into the kernel at each call.

    Parameters annotated ``T.Ref`` are passed by reference (see :class:`Ref`). A last
    ``return value`` gives the call that value (an expression, or a ``T.empty`` output of a
    macro that opens ``T.Kernel`` itself, which an eager kernel may return).
    """

    def decorate(func: Any) -> Any:
        inlined = _script_macro(func, hygienic)
        signature = inspect.signature(func)
        refs = {name for name, p in signature.parameters.items() if _is_ref(p.annotation)}
        if not refs:
            return inlined

        @functools.wraps(func)
        def call(*call_args: Any, **call_kwargs: Any) -> Any:
            bound = signature.bind(*call_args, **call_kwargs)
            for name in refs & bound.arguments.keys():
                bound.arguments[name] = _reference(name, bound.arguments[name])
            return inlined(*bound.args, **bound.kwargs)

        return call

    if not args:
        return decorate
    if len(args) == 1 and callable(args[0]):
        return decorate(args[0])
    raise TileTypeError("T.macro takes a function", hint="write @T.macro or @T.macro(hygienic=False)")
