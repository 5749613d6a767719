"""Parse-time state of one ``@T.prim_func`` and the parser entry point.

TVMScript evaluates the calls in a kernel body (``T.copy(...)``, ``T.Kernel(...)``)
while it builds the IR. Those calls record what the IR cannot hold directly (which
loops are ``T.Parallel``, where the thread id is read) in the active ``Session``;
``prim_func`` turns the records into annotations once parsing is done.

TVMScript turns any exception raised during parsing into a ``DiagnosticError`` whose
text is easily lost (notes pitfall 4). While our parse runs, ``TileError``s are let
through unchanged, with the location of the statement being parsed attached.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import inspect
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.script.ir_builder import IRBuilder  # type: ignore[import-untyped]
from tvm.script.parser._core import parse, utils  # type: ignore[import-untyped]
from tvm.script.parser.core import dispatch, doc  # type: ignore[import-untyped]
from tvm.script.parser.core.diagnostics import Source  # type: ignore[import-untyped]
from tvm.script.parser.core.error import ParserError  # type: ignore[import-untyped]
from tvm.script.parser.core.evaluator import ExprEvaluator  # type: ignore[import-untyped]
from tvm.script.parser.core.parser import Parser  # type: ignore[import-untyped]
from tvm.tirx.script import builder as builder_api  # type: ignore[import-untyped]

from tile.ir.annotations import (
    KERNEL_SOURCE,
    PARALLEL_LOOP,
    THREAD_ATOMICS,
    THREAD_ID_READS,
    THREAD_LEVEL_CALLS,
    USER_LOOP_LAYOUT,
)
from tile.ir.errors import SourceLocation, TileError, location_from_span
from tile.ir.ops.layout_rules import encode_layout

from ..errors import TileParseError, TileScopeError, TileTypeError
from .fast_math import expand_fast_math
from .loop_steps import count_up
from .negative_index import wrap_negative_indices
from .suggestions import unknown_keyword

SOURCE_ATTR = KERNEL_SOURCE
SCRATCH_PARAMS = "tile.scratch_params"
"""How many trailing parameters are ``T.alloc_global`` scratch the caller does not pass."""


@dataclasses.dataclass
class Session:
    """What the builtins record while one kernel is parsed."""

    parallel_vars: list[Any] = dataclasses.field(default_factory=list)
    loop_layouts: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)
    """(first loop var of a ``T.Parallel`` nest, the ``loop_layout=`` fragment given for it)."""
    thread_reads: list[str] = dataclasses.field(default_factory=list)
    kernels: list[Any] = dataclasses.field(default_factory=list)
    func_attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Attributes builtins ask to put on the parsed ``PrimFunc`` (annotations, layouts)."""
    body_rewrites: list[Callable[[Any], Any]] = dataclasses.field(default_factory=list)
    """Rewrites of the parsed body that builtins ask for (``T.Persistent``'s loop nest)."""
    parser: Any = None
    """The TVMScript parser of an eager body (its prelude rebinds Python values, see eager.py)."""
    scratch: list[Any] = dataclasses.field(default_factory=list)
    """Global buffers ``T.alloc_global`` made outside any ``T.Kernel``: they become trailing
    parameters that the compiled kernel allocates at each call (``SCRATCH_PARAMS``)."""
    comm_reducers: list[Any] = dataclasses.field(default_factory=list)
    """The ``T.comm_reducer`` of each enclosing ``with T.attr(..., "reduce_scope", ...)``."""
    bound_values: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)
    """``(scalar buffer, value)`` of each ``name = expr`` of the body (``k_base = bk * 64``: TVMScript
    stores ``bk * 64`` in a one-element local buffer and reads it where ``k_base`` is written),
    so builtins can fold a slice's extent written with such names (``_fold_bound_extents``)."""
    folded_scalars: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)
    """``(scalar buffer, location)``: a slice's extent at ``location`` was folded with the value of
    the buffer's first store; the parsed body must store it only once (checked after the parse)."""
    thread_bindings: list[tuple[Any, str]] = dataclasses.field(default_factory=list)
    """``(loop variable, thread tag)`` of each ``T.thread_binding`` (``kr = T.thread_binding(0, 32,
    thread="threadIdx.x")``: the kernel's own thread index along that axis)."""


_sessions: list[Session] = []


def current_session(construct: str) -> Session:
    """The active session; a ``TileScopeError`` when ``construct`` is used outside a kernel."""
    if not _sessions:
        raise TileScopeError(
            f"{construct} can only be used inside a @T.prim_func body",
            hint="move this call into the kernel function decorated with @T.prim_func",
        )
    return _sessions[-1]


def in_kernel_session() -> bool:
    """Whether a ``@T.prim_func`` body is being parsed now."""
    return bool(_sessions)


def current_location() -> SourceLocation | None:
    """The user's source line being parsed right now, if known."""
    if not IRBuilder.is_in_scope():
        return None
    probe = IRBuilder.current()._set_current_source_span(tirx.const(0, "int32"))
    return location_from_span(probe.span)


def record_thread_atomic(what: str, attr: str = THREAD_ATOMICS) -> None:
    """Note where the kernel uses a thread-level atomic (``annotations.THREAD_ATOMICS``), or
    another GPU-only call (``THREAD_LEVEL_CALLS``): the CPU backend refuses such kernels at
    that line."""
    where = current_location()
    if where is None:
        return
    attrs = current_session(what).func_attrs
    attrs[attr] = [*attrs.get(attr, []), f"{where.filename}:{where.line}:{where.column}"]


def record_thread_level_call(what: str) -> None:
    """Note where the kernel makes an expert-tier GPU call (``annotations.THREAD_LEVEL_CALLS``)."""
    record_thread_atomic(what, THREAD_LEVEL_CALLS)


def _tile_aware_report_error(original: Callable[..., Any]) -> Callable[..., Any]:
    def report_error(self: Any, node: Any, err: Any) -> Any:
        if isinstance(err, TypeError) and not isinstance(err, TileError):
            # T.reduce_sum(..., dims=1): "did you mean `dim`?"
            err = unknown_keyword(err, getattr(getattr(node, "func", None), "attr", None)) or err
        if isinstance(err, TileError):
            if err.location is None:
                with contextlib.suppress(Exception):  # no span: keep the error unlocated
                    err.location = location_from_span(self.diag.source.to_span(node))
            raise err
        return original(self, node, err)

    return report_error


def _tile_eval_assign(original: Callable[..., Any]) -> Callable[..., Any]:
    """Two assignments TileLang programs write in kernel bodies that TVMScript refuses:
    ``with T.Kernel(n) as (bx,):`` (a one-name tuple takes a single expression as a
    one-element sequence; TVMScript would subscript the expression) and
    ``scan = T.cumsum if ... else T.cummax`` (a name bound to a function keeps the function,
    as a Python value; TVMScript would try to make an IR value of it)."""

    def eval_assign(self: Any, target: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(target, doc.Tuple) and len(target.elts) == 1 and isinstance(source, ir.Expr):
            source = (source,)
        if "bind_value" in kwargs:
            bind_value = kwargs.pop("bind_value")
        else:
            bind_value, args = args[0], args[1:]

        def bind(parser: Any, node: Any, name: str, value: Any) -> Any:
            if inspect.isroutine(value):
                return value
            bound = bind_value(parser, node, name, value)
            if _sessions and isinstance(bound, ir.TensorLoad) and isinstance(value, ir.Expr | int | float):
                if not isinstance(value, ir.Expr):  # ``base = 0``: TVMScript stores the constant
                    value = tirx.const(value, str(bound.ty))
                _sessions[-1].bound_values.append((bound.source, value))  # ``x = expr``: a scalar's store
            return bound

        return original(self, target, source, bind, *args, **kwargs)

    return eval_assign


def _tile_buffer_store(original: Callable[..., Any]) -> Callable[..., Any]:
    """``A[0, 4:8] = b`` where ``b = A[0, 0:4]`` (or ``A[0, 4:8] = A[0, 0:4]``): a region
    stored as a value is the vector load of its elements, as in TileLang (TVMScript refuses a
    region as a value)."""

    def buffer_store(buffer: Any, value: Any, indices: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, ir.TensorRegion):
            value = _region_as_vector(value)
        return original(buffer, value, indices, *args, **kwargs)

    return buffer_store


def _region_as_vector(region: Any) -> Any:
    """The elements of ``region`` as one vector value; the region may span one dimension only."""
    spans = [(axis, r) for axis, r in enumerate(region.region) if not _is_one(r.extent)]
    if len(spans) > 1 or any(not isinstance(r.extent, tirx.IntImm) for _, r in spans):
        raise TileTypeError(
            f"a region of {region.source.name} spanning {len(spans)} dimensions (or a run-time "
            "extent) is not a value",
            hint="store a slice of one dimension and a constant length (A[i, 4:8] = B[j, 0:4]), "
            "or copy the region with T.copy(src, dst)",
        )
    indices = [r.min for r in region.region]
    for axis, r in spans:
        indices[axis] = tirx.Ramp(r.min, 1, int(r.extent.value))
    return tirx.BufferLoad(region.source, indices)


def _is_one(extent: Any) -> bool:
    return isinstance(extent, tirx.IntImm) and int(extent.value) == 1


_IF = ("tirx", "If")
_if_tests = itertools.count()


def _tile_visit_if(original: Callable[..., Any]) -> Callable[..., Any]:
    """``if value:`` on a Python value that is neither a bool nor an expression (``None``, a
    number, a list: an eager body's configuration, e.g. ``is_hopper = check_hopper()``, which
    is ``None`` without a GPU) takes the branch Python would; TVMScript refuses the value."""

    def visit_if(self: Any, node: Any) -> Any:
        predicate = _truth(self.eval_expr(node.test))
        # the test is evaluated once: the branch sees its value under a name no program uses
        name = f"__tile_if_test_{next(_if_tests)}__"
        self.var_table.add(name, predicate, allow_shadowing=True)
        test = doc.Name(
            id=name,
            ctx=doc.Load(),
            lineno=node.test.lineno,
            col_offset=node.test.col_offset,
            end_lineno=node.test.end_lineno,
            end_col_offset=node.test.end_col_offset,
        )
        replaced = copy.copy(node)
        replaced.test = test
        return original(self, replaced)

    return visit_if


def _truth(value: Any) -> Any:
    """A Python value's truth (``None``, a number, a list), for a test TVMScript takes as a
    bool or an expression only; expressions and values with no truth stay as they are."""
    if isinstance(value, ir.Expr | bool):
        return value
    try:
        return bool(value)
    except Exception:  # no truth value (an array): TVMScript's error names the line
        return value


def _tile_eval_if_exp(original: Callable[..., Any]) -> Callable[..., Any]:
    """``a if value else b`` on a Python value that is not a bool: Python's choice (see
    ``_tile_visit_if``)."""

    def eval_if_exp(self: Any, node: Any) -> Any:
        test = _truth(self._eval_expr(self._visit(node.test)))
        if isinstance(test, bool):
            return self._eval_expr(self._visit(node.body if test else node.orelse))
        return original(self, node)  # an expression: TVMScript's select (the test is re-read)

    return eval_if_exp


def _tile_visit_node(original: Callable[..., Any]) -> Callable[..., Any]:
    """A generator expression is evaluated whole, as TVMScript evaluates list comprehensions.

    TVMScript visits a generator's parts instead: an element that does not read the loop
    variable is evaluated once, so ``a, b = (T.alloc_fragment(...) for _ in range(2))`` bound
    both names to one buffer (a silent wrong result), and one that reads it failed as an
    undefined variable. It is evaluated as the list comprehension it unpacks like.
    """

    def visit_node(self: Any, node: Any) -> Any:
        if isinstance(node, doc.GeneratorExp):
            fields = {f: getattr(node, f) for f in doc.GeneratorExp._FIELDS}
            node = doc.ListComp(**fields)
        return original(self, node)

    return visit_node


def _annotate_parallel_loops(
    body: Any, parallel_vars: list[Any], loop_layouts: Sequence[tuple[Any, Any]] = ()
) -> Any:
    def on_for(loop: Any) -> Any:
        if not any(loop.loop_var.same_as(v) for v in parallel_vars):
            return loop
        annotations = {str(k): v for k, v in (loop.annotations or {}).items()}
        annotations[PARALLEL_LOOP] = tirx.const(1, "int32")
        for var, layout in loop_layouts:
            if loop.loop_var.same_as(var):
                annotations[USER_LOOP_LAYOUT] = encode_layout(layout)
        return tirx.For(
            loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations
        )

    return tvm_ffi.structural_map(body, (tirx.For, on_for))


class ChainedAssignRewriter(ast.NodeTransformer):
    """``a = b = value`` becomes ``a = value; b = a`` (TVMScript parses one target per assignment;
    TileLang's eager bodies write ``micro_size_x = micro_size_y = 16``), and
    ``A[i] = B[i] = value`` becomes ``A[i] = value; B[i] = value`` (each store gets the value,
    converted to its own dtype, as in Python). A tuple assignment with element targets,
    ``a[0], a[1] = a[1], a[0]``, reads every value first into names of its own, then stores
    them in order, as Python does (TVMScript unpacks tuples into names only)."""

    def __init__(self) -> None:
        self._tuples = 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and all(isinstance(s, ast.stmt) for s in stmts):
                setattr(node, field, [out for s in stmts for out in self._split(self.visit(s))])
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    def _split(self, stmt: Any) -> list[ast.stmt]:
        if _is_python_typed_assign(stmt):  # dtype: str = T.bfloat16: a Python value, annotated
            return [ast.copy_location(ast.Assign(targets=[stmt.target], value=stmt.value), stmt)]
        if _is_element_tuple_assign(stmt):
            return self._unpack(stmt)
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) > 1):
            return [stmt]
        if not all(isinstance(t, ast.Name) for t in stmt.targets):
            if not all(isinstance(t, ast.Name | ast.Subscript) for t in stmt.targets):
                return [stmt]
            return [
                ast.copy_location(ast.Assign(targets=[t], value=copy.deepcopy(stmt.value)), stmt)
                for t in stmt.targets
            ]
        first = stmt.targets[0]
        out: list[ast.stmt] = [ast.copy_location(ast.Assign(targets=[first], value=stmt.value), stmt)]
        for target in stmt.targets[1:]:
            value = ast.copy_location(ast.Name(id=first.id, ctx=ast.Load()), first)  # type: ignore[attr-defined]
            out.append(ast.copy_location(ast.Assign(targets=[target], value=value), stmt))
        return out


    def _unpack(self, stmt: ast.Assign) -> list[ast.stmt]:
        self._tuples += 1
        target, value = stmt.targets[0], stmt.value
        assert isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
        names = [f"_tile_tuple{self._tuples}_{i}" for i in range(len(target.elts))]
        reads = [
            ast.copy_location(ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())], value=v), stmt)
            for n, v in zip(names, value.elts, strict=True)
        ]
        stores = [
            ast.copy_location(ast.Assign(targets=[t], value=ast.Name(id=n, ctx=ast.Load())), stmt)
            for t, n in zip(target.elts, names, strict=True)
        ]
        return [ast.fix_missing_locations(s) for s in reads + stores]


def _check_folded_scalars(body: Any, folded: list[tuple[Any, Any]]) -> None:
    """Each scalar a slice's extent was folded with is written once in ``body`` (its ``x = expr``):
    a second write would make the extent's value depend on which one ran."""
    writes: list[Any] = []

    def on_store(store: Any) -> Any:
        writes.append(store.buffer)
        return store

    def on_region(region: Any) -> Any:  # a tile operator's operand: counted as a write
        writes.append(region.source)
        return region

    tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store), (ir.TensorRegion, on_region)])
    for buffer, where in folded:
        if sum(1 for w in writes if w.same_as(buffer)) > 1:
            raise TileTypeError(
                f"this slice's extent is constant only with `{buffer.name}` at the value of its first "
                f"assignment, and the kernel assigns `{buffer.name}` again",
                hint="write the slice with a constant length (A[i, s : s + 32]), or give the other "
                "value a name of its own",
                location=where,
            )


PYTHON_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "tuple", "dict", "Any"})
"""Annotations naming Python types: ``x: str = v`` in a kernel body is ``x = v`` (TVMScript reads
an annotated assignment as a typed TIR variable, and stopped: "Annotation should resolve to Var")."""


def _is_python_typed_assign(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.AnnAssign)
        and node.value is not None
        and isinstance(node.target, ast.Name)
        and isinstance(node.annotation, ast.Name)
        and node.annotation.id in PYTHON_TYPE_NAMES
    )


def _is_element_tuple_assign(node: ast.AST) -> bool:
    """``a[0], a[1] = x, y`` (a tuple target holding a subscript) or ``a, b = b, a`` (names that
    the value reads: a swap of the body's variables), with a tuple value as long. Other tuples
    of names (``bx, by = 1, 2``) stay TVMScript's unpacking, which binds Python values as they are."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return False
    target, value = node.targets[0], node.value
    if not (
        isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        and all(isinstance(t, ast.Name | ast.Subscript) for t in target.elts)
    ):
        return False
    if any(isinstance(t, ast.Subscript) for t in target.elts):
        return True
    assigned = {t.id for t in target.elts if isinstance(t, ast.Name)}
    return all(isinstance(v, ast.Name) for v in value.elts) and any(
        isinstance(v, ast.Name) and v.id in assigned for v in value.elts
    )


def _needs_assignment_rewrite(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has an assignment ``ChainedAssignRewriter`` rewrites."""
    try:
        tree = ast.parse(Source(fn).source)
    except (OSError, SyntaxError, TypeError):
        return False
    return any(
        (isinstance(node, ast.Assign) and len(node.targets) > 1)
        or _is_element_tuple_assign(node)
        or _is_python_typed_assign(node)
        for node in ast.walk(tree)
    )


def _parse_rewritten(
    fn: Callable[..., Any], extra_vars: dict[str, Any], rewrite: Rewrite, keep_annotations: bool = False
) -> Any:
    """Parse ``fn`` after ``rewrite`` changed its AST (line numbers kept for errors);
    ``keep_annotations``: the parameters keep the annotations Python evaluated for ``fn``."""
    source = Source(fn)
    tree = rewrite(ast.parse(source.source))
    source.as_ast = lambda: doc.to_doc(tree)
    parser = Parser(source, {fn.__name__: fn.__annotations__} if keep_annotations else {})
    if _sessions:
        _sessions[-1].parser = parser
    with IRBuilder() as builder:
        try:
            parser.parse(extra_vars=extra_vars)
        except ParserError as err:
            parser.report_error(err.node, err.args[0])
    return builder.get()


Rewrite = Callable[[ast.Module], ast.Module]


def parse_kernel(
    fn: Callable[..., Any],
    outer_stack: list[Any] | None,
    rewrite: Rewrite | None = None,
    extra_vars: dict[str, Any] | None = None,
) -> Any:
    """Parse ``fn`` as a tile kernel and return the ``PrimFunc``.

    ``rewrite`` (the eager front end) transforms the function's AST first;
    ``extra_vars`` add names to those the function captures.
    """
    if not inspect.isfunction(fn):
        raise TileParseError(f"@T.prim_func expects a function, got {type(fn).__name__}")
    captured = utils.inspect_function_capture(fn)
    if outer_stack is not None:
        utils.resolve_closure_vars(fn, captured, outer_stack)
    extra_vars = {**captured, **(extra_vars or {})}
    session = Session()
    _sessions.append(session)
    original, original_assign = Parser.report_error, Parser.eval_assign
    original_if, original_if_exp = dispatch.ParseVTable[_IF], ExprEvaluator._eval_if_exp
    original_visit_node = ExprEvaluator._visit_node
    original_store = builder_api.buffer_store
    builder_api.buffer_store = _tile_buffer_store(original_store)
    Parser.report_error = _tile_aware_report_error(original)
    Parser.eval_assign = _tile_eval_assign(original_assign)
    dispatch.ParseVTable[_IF] = _tile_visit_if(original_if)
    ExprEvaluator._eval_if_exp = _tile_eval_if_exp(original_if_exp)
    ExprEvaluator._visit_node = _tile_visit_node(original_visit_node)
    try:
        if rewrite is None and _needs_assignment_rewrite(fn):
            func = _parse_rewritten(fn, extra_vars, ChainedAssignRewriter().visit, keep_annotations=True)
        elif rewrite is None:
            func = parse(fn, extra_vars, check_well_formed=False)
        else:
            func = _parse_rewritten(fn, extra_vars, rewrite)
    except TileError:
        raise
    except OSError as exc:  # inspect could not read the function's source text
        code = fn.__code__
        raise TileParseError(
            f"kernel {fn.__name__} has no readable source ({code.co_filename}:{code.co_firstlineno}): {exc}",
            hint="tile parses the kernel's Python source: define kernels in a .py file, "
            "not in an interactive prompt, exec() or a notebook cell without a file",
        ) from None
    except Exception as exc:
        if type(exc).__name__ != "DiagnosticError":
            raise
        text = "\n".join(line for line in str(exc).splitlines() if "TVM_BACKTRACE" not in line).strip()
        raise TileParseError(
            text or f"kernel {fn.__name__} could not be parsed",
            hint="see the marked line; tile kernels are Python with typed tensors and T.* calls",
        ) from None
    finally:
        Parser.report_error, Parser.eval_assign = original, original_assign
        dispatch.ParseVTable[_IF], ExprEvaluator._eval_if_exp = original_if, original_if_exp
        ExprEvaluator._visit_node = original_visit_node
        builder_api.buffer_store = original_store
        _sessions.pop()
    if session.folded_scalars:
        _check_folded_scalars(func.body, session.folded_scalars)
    for rewrite_body in session.body_rewrites:
        func = func.with_body(rewrite_body(func.body))
    func = func.with_body(expand_fast_math(func.body))  # 16-bit T.__exp(x) ... computed in float32
    func = func.with_body(wrap_negative_indices(func.body))  # A[-1] is A[n - 1], as in Python
    func = func.with_body(count_up(func.body))  # range(10, 0, -1) counts down, as in Python
    if session.parallel_vars:
        func = func.with_body(
            _annotate_parallel_loops(func.body, session.parallel_vars, session.loop_layouts)
        )
    code = fn.__code__
    func = func.with_attr(SOURCE_ATTR, f"{code.co_filename}:{code.co_firstlineno}")
    if session.thread_reads:
        func = func.with_attr(THREAD_ID_READS, list(session.thread_reads))
    if session.scratch:  # T.alloc_global at function scope: trailing parameters, allocated per call
        func = tirx.PrimFunc([*func.params, *session.scratch], func.body, attrs=func.attrs)
        func = func.with_attr(SCRATCH_PARAMS, len(session.scratch))
    for key, value in session.func_attrs.items():
        func = func.with_attr(key, value)
    func.__name__ = fn.__name__
    return func


def kernel_location(func: Any) -> SourceLocation | None:
    """Where a parsed kernel's ``def`` line is."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or SOURCE_ATTR not in attrs:
        return None
    filename, line = str(attrs[SOURCE_ATTR]).rsplit(":", 1)
    return SourceLocation.from_file(filename, int(line))


def is_expr(value: object) -> bool:
    return isinstance(value, ir.Expr)
