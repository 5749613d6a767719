"""Shared-memory layouts applied to the storage, on every GPU target.

``infer_layout`` gives a shared tile a layout (an XOR swizzle, ``SwizzledLayout``) where
the instructions reading it want one: wgmma's descriptors, ``ldmatrix`` rows on 32 distinct
banks, MFMA operand reads at the fewest LDS bank conflicts. The lowerings address shared
tiles in their logical coordinates; pass ``apply_shared_layouts`` then maps loads, stores
and ``tvm_access_ptr`` offsets of shared buffers with a swizzled layout through the
layout, so every access agrees with the storage (descriptor start addresses sit on rows
that are multiples of 8, where the swizzle is the identity, so mapping them changes
nothing but the block they are in). CUDA runs it on every arch, ROCm on every gfx target.

A view of such a buffer (``T.reshape`` / ``T.view``: a ``DeclBuffer`` over its data) sees
the tile's logical elements in row-major order, so its accesses follow the layout too: a
view element's row-major offset is a logical offset of the tile, mapped like the tile's
own accesses. A view with another element type reinterprets the tile's *logical* bytes, as
TileLang's ``T.view`` does: view element ``v`` is the bytes ``[v * b', (v + 1) * b')`` of the
tile read row-major in its logical order (``b'`` the view's element size), found in the
storage through the tile's swizzle. A value written through the tile reads back through the
view as numpy's ``.view(dtype)`` of it; an element of up to 16 bytes never straddles the
swizzle's 16-byte units, so each stays whole. TileLang's sparse MLA backward reuses a
bfloat16 gemm operand's bytes as a float32 staging tile that way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import tirx

from tile.layout import SwizzledLayout

from ..errors import TileTypeError, location_from_span
from ..transform import function_pass
from ..transform._traverse import moved_accesses, moved_pointers, range_binding, viewed_buffer
from ..transform.infer_layout import layout_map_of
from ..transform.properties import LAYOUTS_INFERRED, PARALLEL_LOOPS_SCHEDULED, SHARED_LAYOUTS_APPLIED


def _flat(indices: Sequence[Any], shape: Sequence[int]) -> Any:
    out: Any = tirx.const(0, "int32")
    for index, dim in zip(indices, shape, strict=True):
        out = out * dim + index
    return out


def _unflat(offset: Any, shape: Sequence[int]) -> list[Any]:
    out: list[Any] = []
    for dim in reversed(shape):
        out.append(tirx.floormod(offset, dim))
        offset = tirx.floordiv(offset, dim)
    return list(reversed(out))


def _aligned_to_period(storage: dict[Any, tuple[Any, Any]]) -> None:
    """Give every swizzled tile's storage buffer the alignment of the widest swizzle period of
    the kernel (in place in ``storage``): 8 rows of the swizzle span, 1024 bytes for 128B.

    The hardware (and the emulator) swizzles by *absolute* shared address bits: a swizzled
    tile is only read back as written when it starts on a multiple of its period. TVM's
    MergeSharedMemoryAllocations places the merged buffers one after another (smallest
    first) and honours each buffer's ``data_alignment``; without it, a 256-byte vector ahead
    of a 128B-swizzled tile put the tile at 512 mod 1024 and every wgmma read the wrong
    elements. (Padding every dynamic buffer to whole periods also aligned them, but cost up to
    a period per small vector: 3 KiB of the four float rows of the warp-specialized FlashMLA
    decoder, which then no longer fitted sm_90a's 227 KiB.) Each tile's own period was not
    enough: after a small vector, a 64B-swizzled A tile (period 512) at byte 512 put the
    128B-swizzled B tile right after it at 512 mod 1024, its 1024-byte alignment not honoured
    there (TileLang's language/any_of with a shared mask on sm_90a: every block wrong). With
    every swizzled tile aligned to the widest period, and their sizes whole periods, each one
    starts on one.
    """
    widest = max((8 * layout.swizzle_bytes for layout, _ in storage.values()), default=0)
    for buffer, (layout, new) in list(storage.items()):
        period = max(widest, int(new.data_alignment))
        aligned = tirx.decl_buffer(
            new.shape, str(new.dtype), name=str(new.name), scope=str(new.scope()), data_alignment=period
        )
        storage[buffer] = (layout, aligned)


def _views_of(func: Any, storage: dict[Any, tuple[Any, Any]]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """Each view (of a view ...) of a swizzled buffer in ``storage`` -> the buffer it views:
    those with the tile's element type, and (second) those with another one.

    Raises:
        TileTypeError: a view of a swizzled tile with a shape that is not static, or one with
            another element type of sub-byte elements.
    """
    views: dict[Any, Any] = {}
    recasts: dict[Any, Any] = {}
    refused: list[TileTypeError] = []  # raised after the walk, which would wrap it

    def find(decl: Any) -> None:
        base = viewed_buffer(decl)
        if base is None or (base not in storage and base not in views):
            return  # (a view of a recast view is not followed: the recast is the last)
        root = base
        while root in views:
            root = views[root]
        view = decl.buffer
        if any(not isinstance(d, tirx.IntImm) for d in view.shape):
            refused.append(TileTypeError(
                f"{view.name} views the swizzled shared tile {root.name} as {list(view.shape)} x "
                f"{view.dtype}: only a view of static shape can follow the swizzle",
                hint=f"give the view of {root.name} a constant shape, or give the tile no swizzled "
                "layout (drop its T.annotate_layout, or copy it into an unswizzled tile first)",
                location=location_from_span(decl.span),
            ))  # fmt: skip
            return
        if str(view.dtype) != str(root.dtype):
            if min(tvm.DataType(str(view.dtype)).bits, tvm.DataType(str(root.dtype)).bits) < 8:
                refused.append(TileTypeError(
                    f"{view.name} views the swizzled shared tile {root.name} ({root.dtype}) as "
                    f"{view.dtype}: sub-byte elements cannot follow the swizzle",
                    hint=f"give {root.name} no swizzled layout, or view it with a type of 8 bits or more",
                    location=location_from_span(decl.span),
                ))  # fmt: skip
                return
            recasts[view] = base  # the tile's logical bytes, found through the swizzle
            return
        views[view] = base

    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, find), order="pre")
    if refused:
        raise refused[0]
    return views, recasts


def _apply_func(func: Any) -> Any:
    """Map every access of a swizzled shared buffer through its layout (see module docstring).

    Needs: lowered, bound IR whose functions carry ``tile.layout_map``. Guarantees:
    those buffers take their storage shape (leading dims, e.g. pipeline copies, kept)
    and their loads, stores and ``tvm_access_ptr`` offsets address the swizzled storage;
    each swizzled tile's storage is aligned to its swizzle period, so it starts on a period
    once TVM merges the shared buffers.
    """
    layouts = {
        name: layout for name, layout in layout_map_of(func).items() if isinstance(layout, SwizzledLayout)
    }
    if not layouts:
        return func

    analyzer = tvm.sym.Analyzer()  # loop and thread ranges: swizzled indices simplify per vector
    storage: dict[Any, tuple[SwizzledLayout, Any]] = {}  # old buffer -> (layout, storage-shape buffer)

    def find(node: Any) -> None:
        buffer = node.buffer
        layout = layouts.get(str(buffer.name))
        if layout is None or not str(buffer.scope()).startswith("shared"):
            return
        logical = [int(d) for d in layout.get_input_shape()]
        shape = [int(d) for d in buffer.shape]
        lead = shape[: len(shape) - len(logical)]
        if shape[len(lead) :] != logical:
            return
        out = [int(d) for d in layout.get_output_shape()]
        storage[buffer] = (layout, tirx.decl_buffer([*lead, *out], str(buffer.dtype), name=str(buffer.name),
                                                    scope=str(buffer.scope())))  # fmt: skip

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, find))
    if not storage:
        return func
    _aligned_to_period(storage)

    def mapped(buffer: Any, indices: Sequence[Any]) -> list[Any]:
        layout = storage[buffer][0]
        lead = len(buffer.shape) - len(layout.get_input_shape())
        inner = layout.map_forward_index(list(indices[lead:]))
        return [*indices[:lead], *(analyzer.simplify(i) for i in inner)]

    views, recasts = _views_of(func, storage)

    def through_view(buffer: Any, indices: Sequence[Any]) -> tuple[Any, list[Any]]:
        """``buffer`` and ``indices``, a view's access first turned into its base tile's."""
        base = views.get(buffer)
        if base is None:
            return buffer, list(indices)
        offset = _flat(list(indices), [int(d) for d in buffer.shape])
        return through_view(base, _unflat(offset, [int(d) for d in base.shape]))

    def recast_offset(view: Any, offset: Any) -> Any:
        """The storage offset, in ``view``'s elements, of the view's element at ``offset``: the
        tile's logical bits ``[offset * b', ...)`` found through the swizzle (module docstring)."""
        base = recasts[view]
        new_bits, old_bits = tvm.DataType(str(view.dtype)).bits, tvm.DataType(str(base.dtype)).bits
        bit = offset * new_bits
        element, within = tirx.floordiv(bit, old_bits), tirx.floormod(bit, old_bits)
        root, logical = through_view(base, _unflat(element, [int(d) for d in base.shape]))
        new = storage[root][1]
        stored = _flat(mapped(root, logical), [int(d) for d in new.shape])
        return analyzer.simplify(tirx.floordiv(stored * old_bits + within, new_bits))

    def to_storage(buffer: Any, indices: list[Any]) -> tuple[Any, list[Any]] | None:
        if buffer in recasts:
            shape = [int(d) for d in buffer.shape]
            return buffer, _unflat(recast_offset(buffer, _flat(list(indices), shape)), shape)
        buffer, indices = through_view(buffer, indices)
        return (storage[buffer][1], mapped(buffer, indices)) if buffer in storage else None

    def on_decl(node: Any, m: Any) -> Any:
        base = viewed_buffer(node)
        if base is None or base not in storage:
            return node  # a view of a view keeps pointing at its (unchanged) base view
        return tirx.DeclBuffer(node.buffer, data=tirx.buffer_data(storage[base][1]), span=node.span)

    def on_alloc(node: Any, m: Any) -> Any:
        if node.buffer in storage:
            return tirx.AllocBuffer(storage[node.buffer][1], node.annotations)
        return node

    def on_seq(node: Any, m: Any) -> Any:
        # TVM's CompactBufferAllocation shrinks a buffer to the region it sees accessed, a new
        # buffer without the period alignment: a no-access pointer over the whole storage keeps it.
        # Each pointer goes right before the first statement of the allocation's sequence that
        # names the buffer, not after the allocations: TVM's MergeSharedMemoryAllocations counts
        # the pointer as a use, and one at the top made every swizzled tile live from the start
        # (an epilogue's O tile could not reuse the bytes of a Q tile read only before it).
        node = m.default_mutate(node)
        out: list[Any] = []
        pending: list[tuple[Any, Any]] = []  # (storage buffer, its pointer) not yet placed
        for stmt in node.seq:
            if pending and not isinstance(stmt, tirx.AllocBuffer):
                named: list[Any] = []
                tvm_ffi.structural_walk(stmt, (tirx.Var, named.append))
                used = [(b, t) for b, t in pending if any(b.same_as(v) for v in named)]
                out += [touch for _, touch in used]
                pending = [(b, t) for b, t in pending if not any(b.same_as(u) for u, _ in used)]
            out.append(stmt)
            if isinstance(stmt, tirx.AllocBuffer) and any(
                stmt.buffer.same_as(n) for _, n in storage.values()
            ):
                whole = math.prod(int(d) for d in stmt.buffer.shape)
                pointer = stmt.buffer.access_ptr(0, offset=0, extent=whole)
                pending.append((stmt.buffer, tirx.Evaluate(pointer)))
        out += [touch for _, touch in pending]
        return tirx.SeqStmt(out) if len(out) != len(node.seq) else node

    def pointer_to_storage(buffer: Any, offset: Any) -> tuple[Any, Any] | None:
        if buffer in recasts:
            return buffer, recast_offset(buffer, offset)
        if buffer not in storage and buffer not in views:
            return None
        buffer, logical = through_view(buffer, _unflat(offset, [int(d) for d in buffer.shape]))
        new = storage[buffer][1]
        indices = mapped(buffer, logical)
        return new, analyzer.simplify(_flat(indices, [int(d) for d in new.shape]))

    moves = [*moved_accesses(to_storage), *moved_pointers(pointer_to_storage)]
    callbacks = [
        *range_binding(analyzer),
        (tirx.SeqStmt, on_seq),
        (tirx.AllocBuffer, on_alloc),
        (tirx.DeclBuffer, on_decl),
        *moves,
    ]
    body = tvm_ffi.structural_mutate(func.body, callbacks)
    return func.with_body(body)


APPLY_SHARED_LAYOUTS = function_pass(
    _apply_func, name="apply_shared_layouts", needs={PARALLEL_LOOPS_SCHEDULED, LAYOUTS_INFERRED},
    guarantees={SHARED_LAYOUTS_APPLIED})  # fmt: skip
apply_shared_layouts = APPLY_SHARED_LAYOUTS.run
