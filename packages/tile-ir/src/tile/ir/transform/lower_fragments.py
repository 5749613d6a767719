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
address taken by an intrinsic) refer to the per-thread array.
On other targets (the CPU: one thread, fragments are plain arrays) the module is
returned unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.layout import Fragment

from ..errors import LayoutInferenceError, TileTypeError, location_from_span
from ..ops.layout_rules import is_fragment_buffer
from ._traverse import moved_accesses, mutate, range_binding, viewed_buffer
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


def _refuse_fragment_views(body: Any, fragments: dict[Any, Any]) -> None:
    """Raise for a ``T.reshape`` / ``T.view`` of a fragment.

    A view's elements would have to live on the threads and registers where the fragment's
    layout puts the elements they alias, but layout inference gives the view a layout of
    its own (a reduction over a reshaped row read other threads' registers out of bounds).

    Raises:
        TileTypeError: ``body`` declares a view of one of ``fragments``.
    """
    views: list[Any] = []

    def find(decl: Any) -> None:
        base = viewed_buffer(decl)
        if base is None or base.__chandle__() not in fragments:
            return
        bits = [math.prod(b.shape) * int(tvm.DataType(str(b.dtype)).bits) for b in (decl.buffer, base)]
        if tvm.sym.Analyzer().can_prove(bits[0] == bits[1]):  # a whole view; a T.Ref element stays
            views.append((decl, base))

    tvm_ffi.structural_walk(body, (tirx.DeclBuffer, find))
    if views:
        decl, base = views[0]
        raise TileTypeError(
            f"{decl.buffer.name} reshapes or views the fragment {base.name}: a view of a fragment "
            "is not supported (its elements live in other threads' registers than the view's "
            "layout would read)",
            hint=f"reshape the shared or global tile {base.name} is copied from and T.copy that "
            f"into a fragment of shape {list(decl.buffer.shape)}",
            location=location_from_span(decl.span),
        )


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
    _refuse_fragment_views(func.body, fragments)
    analyzer = tvm.sym.Analyzer()

    def lookup(buffer: Any) -> tuple[Any, Fragment] | None:
        return fragments.get(buffer.__chandle__())

    def to_register(buffer: Any, indices: list[Any]) -> tuple[Any, list[Any]] | None:
        hit = lookup(buffer)
        if hit is None:
            return None
        new, frag = hit
        return new, [analyzer.simplify(local_index(frag, indices))]

    def on_alloc(node: Any) -> Any:
        hit = lookup(node.buffer)
        return node if hit is None else tirx.AllocBuffer(hit[0])

    body = mutate(func.body, [*range_binding(analyzer), *moved_accesses(to_register, keep_spans=True)])
    body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc))

    def swap(var: Any) -> Any:
        hit = lookup(var)
        return var if hit is None else hit[0]

    body = tvm_ffi.structural_map(body, (ir.Var, swap))
    return func.with_body(body)


LOWER_FRAGMENTS = context_function_pass(
    _lower_func, name="lower_fragments", needs={PARALLEL_LOOPS_SCHEDULED, LAYOUTS_INFERRED},
    guarantees={FRAGMENTS_LOWERED})  # fmt: skip
lower_fragments = LOWER_FRAGMENTS.run
