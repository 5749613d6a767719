"""Pass ``mark_tma_copies`` (sm_90a, after ``mark_pipeline_statements``).

A kernel qualifies when it
has one marked pipelined loop, not inside another loop, whose versioned tiles are not
used after it, one ``threadIdx.x`` dim of a multiple of 128
threads, and every producer copy of the loop loads a whole 2-D shared tile from a
global tensor parameter of 2 to 5 dims and static shape whose rows are 16-byte multiples
(row-major, or a ``T.StridedTensor`` of constant strides a map can describe:
``_map_strides_expressible``; symbolic strides keep cp.async), the tile's rows along one
outer dim, its columns along the innermost, every other dim one index:
``K[b, k * 64 : (k + 1) * 64, h, :]``, with a shared layout TMA
can fill (``tma.plan_boxes``). Each such copy becomes a
placeholder ``tile_tma_tile(dst span, tensor data, *mins)`` that lowering leaves
alone, and the function gets ``codegen.TMA_MAPS_ATTR``. Anything else keeps the
cp.async path (e.g. a tensor whose rows are not 16-byte multiples); the CPU emulator
(``TILE_DEVICE=emu``) runs both paths. Around a qualifying loop, in the statement list
that holds it, a whole tile loaded before it and a whole shared tile stored into a tensor
after it become ``TMA_ONCE`` / ``TMA_STORE`` placeholders on the same conditions
(``_once_copies``: an attention's Q and O). Manual ``order``/``stage``
annotations do not apply here: the producer runs up to ``num_stages`` tiles ahead and
the consumers run the loop's statements in program order.

Runs only where ``warp_specialize.warp_specialize_requested`` says so (sm_90a, unless
the kernel or ``TILE_CUDA_WARP_SPECIALIZE=0`` turns it off); elsewhere the module is
returned unchanged and the kernel keeps the cp.async ring.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.gpu.async_ring import ASYNC_COPY, PIPELINE_STATEMENT
from tile.ir.gpu.async_ring import body_statements as _body_list
from tile.ir.gpu.async_ring import buffer_uses as _uses
from tile.ir.gpu.async_ring import is_pipelined as _is_pipelined
from tile.ir.gpu.async_ring import loop_notes as _notes
from tile.ir.gpu.statements import seq as _seq
from tile.ir.ops.base import decode, op_class_of
from tile.ir.ops.copy import Copy
from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs
from tile.ir.transform.properties import LAYOUTS_INFERRED, TILE_OPS

from .codegen import TMA_MAPS_ATTR
from .sm80_mark_pipeline_statements import PIPELINE_STATEMENTS_MARKED
from .tma import DATA_TYPES, ELEMENT_BYTES, BoxPlan, TmaUnsupported, plan_boxes, plan_to_json
from .warp_specialize import (
    PRODUCER_THREADS,
    TMA_ONCE,
    TMA_STORE,
    TMA_TILE,
    WS_ATTR,
    WS_LOOP,
    warp_specialize_requested,
    with_block_scalars,
)


def _thread_extent(func: Any) -> tuple[int | None, bool]:
    """``(threadIdx.x extent, only threadIdx.x is bound)``."""
    found: dict[str, Any] = {}

    def on_attr(node: Any) -> None:
        if str(node.attr_key) == "thread_extent":
            found[str(node.node.thread_tag)] = node.value

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, on_attr))
    tx = found.get("threadIdx.x")
    value = int(tx.value) if isinstance(tx, tirx.IntImm) else None
    return value, not any(k in found for k in ("threadIdx.y", "threadIdx.z"))


def _swizzle_of(func: Any, name: str) -> int | None:
    """The swizzle span (bytes) of shared buffer ``name``'s layout; 0 unswizzled; None: other."""
    layouts = func.attrs.get("tile.layout_map") if func.attrs is not None else None
    if layouts is None or name not in layouts:
        return 0
    entry = layouts[name]
    if "swizzle" not in entry:
        return None
    return int(entry["swizzle"][1])


def _tile_dims(extents: list[int | None], tile: list[int | None]) -> int | None:
    """The global dim a ``(rows, cols)`` tile's rows run along, its columns being the last dim.

    Every other dim of the copied region must have extent 1 (a 2-D tensor: dim 0).
    ``None`` when the region is not such a tile.
    """
    rank = len(extents)
    if rank == 2:
        return 0 if extents == tile else None
    if extents[-1] != tile[1] or tile[0] is None:
        return None
    rows = [d for d in range(rank - 1) if extents[d] != 1]
    if not rows:  # a one-row tile: take the innermost outer dim
        return rank - 2 if tile[0] == 1 else None
    if len(rows) != 1 or extents[rows[0]] != tile[0]:
        return None
    return rows[0]


def _tma_tile(func: Any, stmt: Any, store: bool = False) -> tuple[Copy, BoxPlan] | None:
    """The copy and its box plan when ``stmt`` (a marked producer) can be one TMA tile.

    ``store``: a copy from a whole shared tile into a tensor (a TMA store) instead of the load.
    """
    body = stmt.body if isinstance(stmt, tirx.AttrStmt) else stmt
    if not (isinstance(body, tirx.Evaluate) and op_class_of(body.value) is Copy):
        return None
    op = decode(body.value)
    assert isinstance(op, Copy)
    src, dst = (op.dst, op.src) if store else (op.src, op.dst)  # src: the tensor, dst: the tile
    if str(src.scope) != "global" or not 2 <= len(src.shape) <= 5 or len(dst.shape) != 2:
        return None
    if not any(src.buffer.same_as(p) for p in func.params):
        return None  # a view of a parameter (T.Tensor(shape, dtype, X.data)): the map names parameters
    shape = [d.value if isinstance(d, tirx.IntImm) else None for d in src.shape]
    tile = [d.value if isinstance(d, tirx.IntImm) else None for d in dst.shape]
    extents = [e.value if isinstance(e, tirx.IntImm) else None for e in src.extents]
    if None in shape or None in tile or src.dtype != dst.dtype:
        return None
    row_dim = _tile_dims(extents, tile)
    if row_dim is None:
        return None
    if any(not (isinstance(m, tirx.IntImm) and m.value == 0) for m in dst.mins):
        return None
    if [e.value if isinstance(e, tirx.IntImm) else None for e in dst.extents] != tile:
        return None
    if src.dtype not in DATA_TYPES or (int(shape[-1] or 0) * ELEMENT_BYTES[src.dtype]) % 16:
        return None
    if not _map_strides_expressible(src.buffer):
        return None
    swizzle = _swizzle_of(func, dst.name)
    if swizzle is None:
        return None
    try:
        plan = plan_boxes(int(tile[0] or 0), int(tile[1] or 0), src.dtype, swizzle, len(shape), row_dim)
    except TmaUnsupported:
        return None
    return op, plan


def _map_strides_expressible(buffer: Any) -> bool:
    """Whether a tensor map can describe the parameter's strides: row-major, or a
    ``T.StridedTensor`` whose strides are constants, the last 1 and the others multiples of 16
    bytes (the launcher encodes the map with the tensor's own strides). Symbolic strides keep
    the cp.async path: a map's strides must be known to be 16-byte multiples."""
    if not len(buffer.strides):
        return True
    steps = [int(s.value) if isinstance(s, tirx.IntImm) else None for s in buffer.strides]
    if None in steps or steps[-1] != 1:
        return False
    size = ELEMENT_BYTES[str(buffer.dtype)]
    return all((int(s or 0) * size) % 16 == 0 and int(s or 0) > 0 for s in steps[:-1])


def _written(body: Any) -> set[str]:
    """Buffers a statement of ``body`` may write: stores, copy destinations, and every buffer a
    tile op other than a copy names (conservative)."""
    written: set[str] = set()

    def on_evaluate(node: Any) -> None:
        if op_class_of(node.value) is Copy:
            op = decode(node.value)
            assert isinstance(op, Copy)
            written.add(str(op.dst.name))
        elif op_class_of(node.value) is not None:
            written.update(str(b.name) for b in _uses(node))

    tvm_ffi.structural_walk(body, [
        (tirx.BufferStore, lambda node: written.add(str(node.buffer.name))),
        (tirx.Evaluate, on_evaluate),
    ])  # fmt: skip
    return written


def _placeholder(name: str, op: Copy, store: bool) -> Any:
    """``name(tile span, tensor data, *tensor mins)``: the form ``TMA_TILE`` has."""
    tensor, tile = (op.dst, op.src) if store else (op.src, op.dst)
    numel = 1
    for extent in tile.shape:
        numel *= int(extent)
    access = 1 if store else 2  # read / write
    span = tirx.tvm_access_ptr(tirx.type_annotation(tile.dtype), tile.buffer.data, 0, numel, access)
    return tirx.Evaluate(tirx.call_extern("void", name, span, tensor.buffer.data, *tensor.mins))


def _once_copies(func: Any, body: Any, maps: dict[str, dict[str, Any]], versioned: set[str]) -> Any:
    """``body`` with the copies around the warp-specialized loop that TMA can do made placeholders.

    In the statement list that holds the loop: a whole swizzled tile (so that it starts on a
    swizzle period, as every dynamic shared buffer then does) loaded before it from a tensor the
    kernel never writes, into a tile no earlier statement names (``TMA_ONCE``: the producer
    loads it before its loop, the consumers wait for it where the copy was); and a whole shared
    tile stored after it into a tensor no later statement names (``TMA_STORE``). ``maps``
    gains their tensors' maps; a tensor whose map would differ keeps its plain copy.
    """
    written = _written(body)

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        at = next((i for i, s in enumerate(stmts) if isinstance(s, tirx.For) and WS_LOOP in _notes(s)), None)
        if at is None:
            return seq
        out = list(stmts)
        for i, stmt in enumerate(stmts):
            store = i > at
            found = _tma_tile(func, stmt, store) if i != at else None
            if found is None:
                continue
            op, plan = found
            if not plan.swizzle_bytes:
                continue  # a ring stage is padded to TMA's alignment; an unswizzled tile may not be
            tensor, tile = (op.dst, op.src) if store else (op.src, op.dst)
            if store:
                later = set().union(*(_names(s) for s in stmts[i + 1 :]))
                if str(tensor.name) in later:
                    continue  # read or written after the store: it must have landed first
            else:
                earlier = set().union(*(_names(s) for s in stmts[:i]))
                if str(tile.name) in versioned | earlier or str(tensor.name) in written:
                    continue
            if maps.get(str(tensor.name), plan_to_json(plan)) != plan_to_json(plan):
                continue  # one map per tensor
            maps[str(tensor.name)] = plan_to_json(plan)
            out[i] = _placeholder(TMA_STORE if store else TMA_ONCE, op, store)
        return tirx.SeqStmt(out)

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq))


def _names(stmt: Any) -> set[str]:
    return {str(b.name) for b in _uses(stmt)}


def _mark_func(func: Any) -> Any:
    threads, only_x = _thread_extent(func)
    if threads is None or not only_x or threads % 128 != 0 or threads + PRODUCER_THREADS > 1024:
        return func
    loops: list[Any] = []

    def find(loop: Any) -> None:
        if _is_pipelined(loop) and any(
            isinstance(s, tirx.AttrStmt) and str(s.attr_key) == PIPELINE_STATEMENT for s in _body_list(loop)
        ):
            loops.append(loop)

    tvm_ffi.structural_walk(func.body, (tirx.For, find))
    if len(loops) != 1:
        return func
    (loop,) = loops
    bounds = tirx.SeqStmt([tirx.Evaluate(loop.min), tirx.Evaluate(loop.extent)])
    if with_block_scalars(bounds, func.body) is None:
        return func  # the producer could not recompute the loop's bounds
    # Barrier parities count the loop's own iterations from 0: a loop run again by an outer
    # loop would meet barriers whose phases went on, so only a top-level loop qualifies.
    outer: list[Any] = []

    def around(node: Any) -> None:
        inner: list[Any] = []
        tvm_ffi.structural_walk(node.body, (tirx.For, lambda f: inner.append(f) if f.same_as(loop) else None))
        if inner:
            outer.append(node)

    tvm_ffi.structural_walk(func.body, (tirx.For, around))
    if outer:
        return func
    # The ring gives each versioned buffer num_stages copies: none may be used after the loop.
    without = tvm_ffi.structural_map(
        func.body, (tirx.For, lambda o: tirx.Evaluate(0) if o.same_as(loop) else o)
    )
    versioned = {str(n) for n in _notes(loop).get("tile.pipeline_versioned", [])}
    if any(str(b.name) in versioned for b in _uses(without)):
        return func
    maps: dict[str, dict[str, Any]] = {}
    new_body = []
    dsts: set[str] = set()
    for stmt in _body_list(loop):
        inner = stmt.body
        if isinstance(inner, tirx.AttrStmt) and str(inner.attr_key) == ASYNC_COPY:
            found = _tma_tile(func, inner)
            if found is None:
                return func
            op, plan = found
            tensor = op.src.name
            if tensor in maps and maps[tensor] != plan_to_json(plan):
                return func  # one map per tensor: every tile of it has the same box
            maps[tensor] = plan_to_json(plan)
            dsts.add(op.dst.name)
            numel = plan.rows * plan.cols
            span = tirx.tvm_access_ptr(tirx.type_annotation(op.dst.dtype), op.dst.buffer.data, 0, numel, 2)
            call = tirx.call_extern("void", TMA_TILE, span, op.src.buffer.data, *op.src.mins)
            if with_block_scalars(tirx.Evaluate(call), func.body) is None:
                # the producer warps could not recompute the tile's corner (a group index read
                # from memory, TileLang's grouped GEMM): the loop stays a cp.async pipeline
                return func
            inner = tirx.AttrStmt(inner.node, str(inner.attr_key), inner.value, tirx.Evaluate(call))
        new_body.append(tirx.AttrStmt(stmt.node, str(stmt.attr_key), stmt.value, inner))
    if not maps or dsts != versioned:
        return func
    notes = {**_notes(loop), WS_LOOP: tirx.const(1, "int32")}
    new_loop = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, _seq(new_body), loop.thread_binding,
                        notes, span=loop.span)  # fmt: skip
    body = tvm_ffi.structural_map(func.body, (tirx.For, lambda f: new_loop if f.same_as(loop) else f))
    body = _once_copies(func, body, maps, versioned)
    return func.with_body(body).with_attrs({TMA_MAPS_ATTR: maps, WS_ATTR: threads})


def mark_tma_copies(mod: Any, ctx: CompileContext) -> Any:
    """Turn the producer copies of a qualifying pipelined loop into TMA tile placeholders."""
    if not warp_specialize_requested(ctx.target):
        return mod
    return map_prim_funcs(mod, _mark_func)


TMA_COPIES_MARKED = Property(
    "tma_copies_marked",
    "a qualifying pipelined loop's producer copies are TMA tile placeholders; its function has the maps",
)
MARK_TMA_COPIES = Pass(
    "mark_tma_copies",
    mark_tma_copies,
    needs={PIPELINE_STATEMENTS_MARKED, LAYOUTS_INFERRED, TILE_OPS},
    guarantees={TMA_COPIES_MARKED},
)

__all__ = ["MARK_TMA_COPIES", "TMA_COPIES_MARKED", "mark_tma_copies"]
