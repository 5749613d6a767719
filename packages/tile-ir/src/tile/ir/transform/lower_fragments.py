"""Pass ``lower_fragments``: block-level fragments become per-thread register arrays.

Needs: thread-bound code (after ``bind_parallel_loops``): every access to a
``local.fragment`` buffer is executed by the thread that owns the element under
the buffer's fragment in ``tile.layout_map`` (``infer_layout``), inside the
``threadIdx.x`` ``thread_extent`` of the kernel. Lowering rules that work per
thread write fragment accesses in block coordinates too, e.g. ``X[i, j]`` with
``(i, j) = fragment_coords(F, threadIdx.x, local)``.

Guarantees (targets with ``Capabilities.thread_binding``): no ``local.fragment``
buffer is left. A fragment ``X`` of shape ``(128, 128)`` over 128 threads becomes
``X`` in scope ``local`` with shape ``(locals_per_thread,)`` and every access
``X[i, j]`` becomes ``X[F.index(i, j)]`` (the local index flattened row-major),
simplified with the ranges of the enclosing loops and thread variables, so
``X[F.index(F^-1(tx, l))]`` comes out as ``X[l]``. Other uses of the buffer (an
address taken by an intrinsic) refer to the per-thread array. An access ``V[x]`` of a
``T.reshape`` ``V`` of a fragment ``X`` (same element type) is ``X``'s access at the same
row-major position; a view with another element type is refused.
On other targets (the CPU: one thread, fragments are plain arrays) the module is
returned unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.layout import Fragment
from tile.layout.layout import row_major_reshape

from ..errors import LayoutInferenceError, TileTypeError, location_from_span
from ..ops.layout_rules import is_fragment_buffer
from ._traverse import WholeView, moved_accesses, mutate, range_binding, whole_views
from .infer_layout import layout_map_of
from .pipeline import CompileContext, context_function_pass
from .properties import FRAGMENTS_LOWERED, LAYOUTS_INFERRED, PARALLEL_LOOPS_SCHEDULED

__all__ = ["LOWER_FRAGMENTS", "fragment_coords", "fragment_replica_coords", "local_index", "lower_fragments"]


def local_index(frag: Fragment, indices: Sequence[Any]) -> Any:
    """The flat per-thread index of element ``indices`` (row-major over the local dims)."""
    local = frag.map_forward_index(list(indices))
    shape = frag.get_output_shape()
    flat: Any = tirx.const(0, "int32")
    for index, extent in zip(local, shape, strict=True):
        flat = flat * extent + index
    return flat


def fragment_coords(frag: Fragment, thread: Any, local: Any) -> tuple[list[Any], Any]:
    """``(coords, valid)``: the element thread ``thread`` holds at flat local ``local``.

    ``valid`` is false on padding slots (a fragment whose box is not full). Only for
    fragments without replication: a replicated fragment's element is held by
    several threads (see ``fragment_replica_coords``).
    """
    outputs, valid = _invert(frag.as_layout(), thread, local)
    return outputs, valid


def fragment_replica_coords(frag: Fragment, thread: Any, local: Any) -> tuple[list[Any], Any, Any]:
    """``(coords, replica, valid)`` of the element ``thread`` holds at flat local ``local``.

    For replicated fragments too: ``replica`` says which of the element's copies the
    thread holds, so a rule that must touch each element once keeps ``replica == 0``.
    """
    outputs, valid = _invert(frag.owner_layout(), thread, local)
    return outputs[:-1], outputs[-1], valid


def _invert(layout: Any, thread: Any, local: Any) -> tuple[list[Any], Any]:
    inverse, guard = layout.inverse_with_guard()
    shape = [int(e) for e in inverse.get_input_shape()][1:]
    point: list[Any] = [thread]
    rest = local
    for extent in reversed(shape):
        point.insert(1, tirx.floormod(rest, extent))
        rest = tirx.floordiv(rest, extent)
    coords = inverse.map_forward_index(point)
    table = dict(zip(inverse.get_forward_vars(), point, strict=True))
    valid = tvm_ffi.structural_map(
        guard, (ir.Var, lambda v: next((x for k, x in table.items() if v.same_as(k)), v))
    )
    return list(coords), valid


def _local_buffer(buffer: Any, frag: Fragment) -> Any:
    return tirx.decl_buffer(
        (frag.locals_per_thread(),), str(buffer.dtype), name=str(buffer.name), scope="local"
    )


def _fragment_views(body: Any, fragments: dict[Any, Any]) -> dict[Any, WholeView]:
    """The ``T.reshape`` views of ``fragments`` in ``body`` (by handle of the view buffer).

    A reshape is a view of the fragment's registers: ``infer_layout`` gives it the
    fragment's layout reshaped (``Fragment.reshape``), so each of its elements is on the
    thread that holds the element it aliases, in the same register.

    Raises:
        TileTypeError: a view of a fragment with another element type, or with a shape
            that is not constant, which no per-element register correspondence gives.
    """
    views: dict[Any, WholeView] = {}
    for view in whole_views(body):
        if view.root.__chandle__() not in fragments:
            continue
        if not view.same_elements:
            raise TileTypeError(
                f"{view.view.name} views the fragment {view.root.name} ({list(view.root.shape)} x "
                f"{view.root.dtype}) as {list(view.view.shape)} x {view.view.dtype}: a fragment is "
                f"spread over the threads' registers one element of {view.root.dtype} at a time, "
                "so only a reshape with constant shapes and the same element type is a view of it",
                hint=f"T.copy {view.root.name} into a shared tile and view that, or T.reshape "
                f"{view.root.name} keeping its element type",
                location=location_from_span(view.decl.span),
            )
        views[view.view.__chandle__()] = view
    return views


def _lower_func(func: Any, ctx: CompileContext) -> Any:
    """Turn every fragment into a per-thread local array (thread-binding targets only)."""
    if not ctx.capabilities.thread_binding:
        return func
    layouts = layout_map_of(func)
    fragments: dict[Any, tuple[Any, Fragment]] = {}

    def collect(node: Any) -> None:
        buffer = node.buffer
        if not is_fragment_buffer(buffer):
            return
        frag = layouts.get(str(buffer.name))
        if not isinstance(frag, Fragment):
            raise LayoutInferenceError(
                f"fragment {buffer.name} has no inferred layout",
                hint="run infer_layout before lower_fragments",
            )
        fragments[buffer.__chandle__()] = (_local_buffer(buffer, frag), frag)

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, collect))
    if not fragments:
        return func
    views = _fragment_views(func.body, fragments)
    analyzer = tvm.sym.Analyzer()

    def lookup(buffer: Any) -> tuple[Any, Fragment] | None:
        return fragments.get(buffer.__chandle__())

    def to_register(buffer: Any, indices: list[Any]) -> tuple[Any, list[Any]] | None:
        view = views.get(buffer.__chandle__())
        if view is not None:  # the fragment's element at the same row-major position
            old_shape = [int(d) for d in view.root.shape]
            indices = row_major_reshape([int(d) for d in buffer.shape], old_shape).map_forward_index(indices)
            buffer = view.root
        hit = lookup(buffer)
        if hit is None:
            return None
        new, frag = hit
        return new, [analyzer.simplify(local_index(frag, indices))]

    def on_decl(node: Any) -> Any:
        view = views.get(node.buffer.__chandle__())
        if view is None:
            return node
        # no access is left to the view (they go to the registers): it points at them too
        return tirx.DeclBuffer(
            node.buffer, data=tirx.buffer_data(fragments[view.root.__chandle__()][0]), span=node.span
        )

    def on_alloc(node: Any) -> Any:
        hit = lookup(node.buffer)
        return node if hit is None else tirx.AllocBuffer(hit[0])

    body = mutate(func.body, [*range_binding(analyzer), *moved_accesses(to_register, keep_spans=True)])
    body = tvm_ffi.structural_map(body, [(tirx.AllocBuffer, on_alloc), (tirx.DeclBuffer, on_decl)])

    def swap(var: Any) -> Any:
        hit = lookup(var)
        return var if hit is None else hit[0]

    body = tvm_ffi.structural_map(body, (ir.Var, swap))
    return func.with_body(body)


LOWER_FRAGMENTS = context_function_pass(
    _lower_func, name="lower_fragments", needs={PARALLEL_LOOPS_SCHEDULED, LAYOUTS_INFERRED},
    guarantees={FRAGMENTS_LOWERED})  # fmt: skip
lower_fragments = LOWER_FRAGMENTS.run
