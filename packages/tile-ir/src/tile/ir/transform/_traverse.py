"""``tvm_ffi`` traversals that let ``TileError`` through, and callbacks passes share.

An exception raised inside a ``structural_mutate``/``structural_map`` callback
crosses the FFI and comes back as a plain ``RuntimeError`` with the text folded in.
These wrappers remember the ``TileError`` a callback raised and re-raise it as is,
so users see the typed error with its location and hint.

``range_binding``, ``moved_accesses`` and ``moved_pointers`` are ``structural_mutate`` callbacks for the
passes that move buffer accesses to new storage (fragments to registers, swizzled
shared tiles, pipeline ring copies).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..errors import TileError

Callback = tuple[type, Callable[..., Any]]
Move = Callable[[Any, list[Any]], "tuple[Any, list[Any]] | None"]
"""``move(buffer, indices)``: where an access goes, ``(new_buffer, new_indices)``, or ``None``."""
PointerMove = Callable[[Any, Any], "tuple[Any, Any] | None"]
"""``move(buffer, offset)``: where a ``tvm_access_ptr`` goes, ``(new_buffer, new_offset)``, or ``None``."""


def _guarded(callbacks: Sequence[Callback], box: list[TileError]) -> list[Callback]:
    def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
        arity = len(inspect.signature(fn).parameters)

        def call(*args: Any) -> Any:
            try:
                return fn(*args[:arity])
            except TileError as exc:
                box.append(exc)
                raise

        return call

    return [(kind, guard(fn)) for kind, fn in callbacks]


def _reraising(traversal: Callable[[Any, Any], Any], root: Any, callbacks: Sequence[Callback]) -> Any:
    box: list[TileError] = []
    try:
        return traversal(root, _guarded(callbacks, box))
    except Exception:
        if box:
            raise box[0] from None
        raise


def mutate(root: Any, callbacks: Sequence[Callback]) -> Any:
    """``tvm_ffi.structural_mutate`` that re-raises a callback's ``TileError`` unchanged."""
    return _reraising(tvm_ffi.structural_mutate, root, callbacks)


def map_nodes(root: Any, callbacks: Sequence[Callback]) -> Any:
    """``tvm_ffi.structural_map`` that re-raises a callback's ``TileError`` unchanged."""
    return _reraising(tvm_ffi.structural_map, root, callbacks)


def range_binding(analyzer: Any) -> list[Callback]:
    """Callbacks that bind each loop variable and thread index in ``analyzer`` on the way
    down, so that the indices rewritten below them simplify."""

    def on_for(node: Any, m: Any) -> Any:
        analyzer.bind(node.loop_var, ir.Range(node.min, node.min + node.extent))
        return m.default_mutate(node)

    def on_attr(node: Any, m: Any) -> Any:
        if str(node.attr_key) == "thread_extent":
            analyzer.bind(node.node.var, ir.Range(0, node.value))
        return m.default_mutate(node)

    return [(tirx.For, on_for), (tirx.AttrStmt, on_attr)]


def viewed_buffer(decl: Any) -> Any | None:
    """The buffer whose data a ``DeclBuffer`` views (``T.reshape``, ``T.view``), or ``None``."""
    data = decl.data
    if isinstance(data, ir.Call) and isinstance(data.op, ir.Op) and str(data.op.name) == "tirx.buffer_data":
        return data.args[0]
    return None


@dataclasses.dataclass(frozen=True)
class WholeView:
    """A ``T.reshape`` / ``T.view`` covering every byte of the buffer it views.

    ``root`` is the allocated buffer at the end of a chain of views (a reshape of a
    reshape views the allocation too)."""

    decl: Any
    view: Any
    root: Any

    @property
    def same_elements(self) -> bool:
        """The view has the root's element type and constant shapes on both sides: its
        element ``x`` is the root's element at ``x``'s row-major position."""
        shapes = [self.view.shape, self.root.shape]
        static = all(isinstance(d, tirx.IntImm) for shape in shapes for d in shape)
        return static and str(self.view.dtype) == str(self.root.dtype)


def whole_views(body: Any) -> list[WholeView]:
    """Every declaration in ``body`` that views all of another buffer (one-element ``T.Ref``
    views and other partial ones are left out), outermost first."""
    roots: dict[Any, Any] = {}
    found: list[WholeView] = []
    analyzer = tvm.sym.Analyzer()

    def bits(buffer: Any) -> Any:
        return math.prod(buffer.shape) * int(tvm.DataType(str(buffer.dtype)).bits)

    def find(decl: Any) -> None:
        base = viewed_buffer(decl)
        if base is None or not analyzer.can_prove(bits(decl.buffer) == bits(base)):
            return
        root = roots.get(base.__chandle__(), base)
        roots[decl.buffer.__chandle__()] = root
        found.append(WholeView(decl, decl.buffer, root))

    tvm_ffi.structural_walk(body, (tirx.DeclBuffer, find), order="pre")
    return found


def moved_accesses(move: Move, *, keep_spans: bool = False) -> list[Callback]:
    """Callbacks that send each store and load (after its operands) to where ``move`` says;
    ``keep_spans`` keeps a store's source span (its kernel-line mark)."""

    def on_store(node: Any, m: Any) -> Any:
        node = m.default_mutate(node)
        moved = move(node.buffer, list(node.indices))
        if moved is None:
            return node
        return tirx.BufferStore(moved[0], node.value, moved[1], span=node.span if keep_spans else None)

    def on_load(node: Any, m: Any) -> Any:
        node = m.default_mutate(node)
        moved = move(node.source, list(node.indices))
        return node if moved is None else tirx.BufferLoad(*moved)

    return [(tirx.BufferStore, on_store), (ir.TensorLoad, on_load)]


def moved_pointers(move: PointerMove) -> list[Callback]:
    """Callbacks that send each ``tvm_access_ptr`` into a buffer (after its operands) to where
    ``move`` says."""

    def on_call(call: Any, m: Any) -> Any:
        call = m.default_mutate(call)
        if not isinstance(call.op, ir.Op) or str(call.op.name) != "tirx.tvm_access_ptr":
            return call
        data = call.args[1]
        if not (isinstance(data, ir.Call) and str(data.op.name) == "tirx.buffer_data"):
            return call
        moved = move(data.args[0], call.args[2])
        if moved is None:
            return call
        args = list(call.args)
        args[1], args[2] = moved[0].data, moved[1]
        return ir.Call(call.op, args, span=call.span, ret_ty=call.ty)

    return [(ir.Call, on_call)]


def loop_over(loop: Any, body: Any, annotations: Any = None) -> Any:
    """``loop`` over ``body`` (kind, binding, step and span kept), with ``annotations`` when given;
    ``loop`` itself when neither changes it."""
    if annotations is None:
        if body.same_as(loop.body):
            return loop
        annotations = loop.annotations
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, annotations,
                    step=loop.step, span=loop.span)  # fmt: skip
