"""sm_90a ``T.Pipelined`` on TMA + mbarriers with a producer warpgroup (default on).

On for sm_90a unless the kernel turns it off (``pass_configs={"tl.disable_warp_specialized":
True}`` or the target option ``{"warp_specialize": "0"}``) or ``TILE_CUDA_WARP_SPECIALIZE=0``
does for every kernel (``tma.warp_specialize_enabled``); off, the sm_90a pipeline is
exactly the cp.async ring of ``pipeline_copy``, and so is any kernel that does not
qualify (below). Three passes and a source step, placed by ``with_warp_specialize``:

``mark_tma_copies`` (after ``mark_pipeline_statements``). A kernel qualifies when it
has one marked pipelined loop, not inside another loop, whose versioned tiles are not
used after it, one ``threadIdx.x`` dim of a multiple of 128
threads, and every producer copy of the loop loads a whole 2-D shared tile from a
row-major global tensor of 2 to 5 dims and static shape whose rows are 16-byte
multiples (the tile's rows along one outer dim, its columns along the innermost, every
other dim one index: ``K[b, k * 64 : (k + 1) * 64, h, :]``), with a shared layout TMA
can fill (``tma.plan_boxes``). Each such copy becomes a
placeholder ``tile_tma_tile(dst span, tensor data, *mins)`` that lowering leaves
alone, and the function gets ``codegen.TMA_MAPS_ATTR``. Anything else keeps the
cp.async path (e.g. a tensor whose rows are not 16-byte multiples), and so does
every kernel under the CPU emulator (``TILE_DEVICE=emu``). Manual ``order``/``stage``
annotations do not apply here: the producer runs up to ``num_stages`` tiles ahead and
the consumers run the loop's statements in program order.

``warp_specialize_loop`` (before ``pipeline_async_copies``, which then no longer
sees the loop). The loop becomes two loops over the same iterations ``k``, stage
``s = k % num_stages`` of each versioned buffer, phase parity ``(k / num_stages) & 1``:
the consumer loop waits on ``full[s]``, runs the loop's other statements in their
order and arrives on ``empty[s]`` (every consumer thread; the gemm's wgmma has
waited for its shared reads by then); the producer loop (one elected thread) waits
on ``empty[s]`` with the opposite parity (a fresh barrier passes), announces the
stage's bytes with ``arrive_expect_tx(full[s])`` and issues one TMA load per box.
TMA fills out-of-bound elements with zeros, so ragged tails need no predicate.

``split_producer_warps`` (last). The block gets 128 more threads; threads
``[T, T + 128)`` form the producer warpgroup, so the user's threads keep their
indices ``0..T-1``. Thread 0 initialises the barriers (``full`` expects one arrival
plus the bytes, ``empty`` expects ``T``), a CTA-wide barrier publishes them, then
``setmaxnreg`` moves registers from the producer warpgroup to the consumers.

``finish_source`` (codegen). ``__launch_bounds__(T + 128, 1)`` (setmaxnreg needs
it), 1024-byte aligned dynamic shared memory (128B swizzle), and every
``__syncthreads()`` TVM placed (all in the consumer branch: the producer touches
shared memory only through TMA) becomes the named barrier 1 over the ``T``
consumer threads, because the producer warps never reach it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm.s_tir  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.gpu.async_ring import ASYNC_COPY, PIPELINE_STATEMENT
from tile.ir.gpu.async_ring import body_statements as _body_list
from tile.ir.gpu.async_ring import buffer_uses as _uses
from tile.ir.gpu.async_ring import is_pipelined as _is_pipelined
from tile.ir.gpu.async_ring import loop_notes as _notes
from tile.ir.gpu.async_ring import substitute as _substitute
from tile.ir.gpu.async_ring import versioned_ring as _ring
from tile.ir.gpu.statements import extern_call as _extern
from tile.ir.gpu.statements import seq as _seq
from tile.ir.ops.base import decode, op_class_of
from tile.ir.ops.copy import Copy
from tile.ir.target import Target
from tile.ir.transform import CompileContext, Pass, map_prim_funcs

from .codegen import TMA_MAPS_ATTR
from .tma import (
    DATA_TYPES,
    ELEMENT_BYTES,
    BoxPlan,
    TmaUnsupported,
    map_param_name,
    plan_boxes,
    plan_from_json,
    plan_to_json,
)

WS_ATTR = "tile.warp_specialized"
"""PrimFunc attr: the user's thread count ``T`` of a warp-specialized kernel."""
WS_LOOP = "tile.warp_specialize"
WS_PRODUCER = "tile.ws_producer"
WS_STAGES = "tile.ws_stages"
MBAR = "tile_mbar"
TMA_TILE = "tile_tma_tile"
PRODUCER_THREADS = 128
NUM_REGISTERS = 65536


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


def _tma_tile(func: Any, stmt: Any) -> tuple[Copy, BoxPlan] | None:
    """The copy and its box plan when ``stmt`` (a marked producer) can be one TMA tile."""
    body = stmt.body if isinstance(stmt, tirx.AttrStmt) else stmt
    if not (isinstance(body, tirx.Evaluate) and op_class_of(body.value) is Copy):
        return None
    op = decode(body.value)
    assert isinstance(op, Copy)
    src, dst = op.src, op.dst
    if str(src.scope) != "global" or not 2 <= len(src.shape) <= 5 or len(dst.shape) != 2:
        return None
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
    swizzle = _swizzle_of(func, dst.name)
    if swizzle is None:
        return None
    try:
        plan = plan_boxes(int(tile[0] or 0), int(tile[1] or 0), src.dtype, swizzle, len(shape), row_dim)
    except TmaUnsupported:
        return None
    return op, plan


def _scalars(body: Any) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
    """The block's single-assignment scalars: ``([(let var, value)], {buffer name: value})``.

    A ``Bind`` (let), or a 1-element local buffer stored once, outside any loop
    (``loop_range = ...`` in a tile program becomes such a buffer). The producer loop
    leaves the consumer branch, where these are set, so it reads their values instead
    (attention's causal ``loop_range``).
    """
    lets: list[tuple[Any, Any]] = []
    stores: dict[str, list[Any]] = {}
    looped: set[str] = set()
    scalars: set[str] = set()

    def on_alloc(node: Any) -> None:
        buf = node.buffer
        if str(buf.scope()) == "local" and [int(d) for d in buf.shape if isinstance(d, tirx.IntImm)] == [1]:
            scalars.add(str(buf.name))

    def on_loop(loop: Any) -> None:
        tvm_ffi.structural_walk(loop.body, (tirx.BufferStore, lambda st: looped.add(str(st.buffer.name))))

    tvm_ffi.structural_walk(body, [
        (tirx.AllocBuffer, on_alloc),
        (tirx.For, on_loop),
        (tirx.BufferStore, lambda st: stores.setdefault(str(st.buffer.name), []).append(st)),
        (tirx.Bind, lambda b: lets.append((b.var, b.value))),
    ])  # fmt: skip
    buffers = {name: stores[name][0].value for name in scalars - looped if len(stores.get(name, [])) == 1}
    return lets, buffers


def _reads_memory(expr: Any) -> bool:
    loads: list[Any] = []
    tvm_ffi.structural_walk(expr, (ir.TensorLoad, loads.append))
    return bool(loads)


def _with_scalars(node: Any, body: Any) -> Any | None:
    """``node`` with the block scalars it reads (see ``_scalars``) replaced by their values.

    ``None`` when it reads one it cannot replace: a value that loads memory (it could
    differ by thread, or by when the producer runs) or a scalar set more than once.
    """
    lets, buffers = _scalars(body)
    hits: list[Any] = []

    def on_load(load: Any) -> Any:
        value = buffers.get(str(load.source.name))
        if value is not None and not _reads_memory(value):
            hits.append(load)
            return value
        return load

    def on_var(var: Any) -> Any:
        value = next((v for k, v in lets if k.same_as(var)), None)
        if value is not None and not _reads_memory(value):
            hits.append(var)
            return value
        return var

    for _ in range(8):  # a scalar set from another scalar: a few rounds reach the leaves
        hits.clear()
        node = tvm_ffi.structural_map(node, [(ir.TensorLoad, on_load), (tirx.Var, on_var)])
        if not hits:
            break
    let_vars = [k for k, _ in lets]
    unresolved = [v for v in tirx.analysis.undefined_vars(node, []) if any(v.same_as(k) for k in let_vars)]
    local_reads: list[Any] = []

    def on_read(load: Any) -> None:
        buf = load.source
        if str(buf.scope()) == "local":
            local_reads.append(load)

    tvm_ffi.structural_walk(node, (ir.TensorLoad, on_read))
    return None if unresolved or local_reads else node


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
    if _with_scalars(bounds, func.body) is None:
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
            inner = tirx.AttrStmt(inner.node, str(inner.attr_key), inner.value, tirx.Evaluate(call))
        new_body.append(tirx.AttrStmt(stmt.node, str(stmt.attr_key), stmt.value, inner))
    if not maps or dsts != versioned:
        return func
    notes = {**_notes(loop), WS_LOOP: tirx.const(1, "int32")}
    new_loop = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, _seq(new_body), loop.thread_binding,
                        notes, span=loop.span)  # fmt: skip
    body = tvm_ffi.structural_map(func.body, (tirx.For, lambda f: new_loop if f.same_as(loop) else f))
    return func.with_body(body).with_attrs({TMA_MAPS_ATTR: maps, WS_ATTR: threads})


def mark_tma_copies(mod: Any, ctx: CompileContext) -> Any:
    """Turn the producer copies of a qualifying pipelined loop into TMA tile placeholders."""
    return map_prim_funcs(mod, _mark_func)


MARK_TMA_COPIES = Pass("mark_tma_copies", mark_tma_copies)


# --------------------------------------------------------------------------- the two loops
def _bar(mbar: Any, index: Any) -> Any:
    return tirx.address_of(tirx.BufferLoad(mbar, [index]))


def _tma_loads(call: Any, plan: BoxPlan, ring: Any, stage: Any, full: Any, tensor: str) -> list[Any]:
    """One ``tile_tma_load_<rank>d`` per box of the placeholder ``call`` into ``stage``."""
    _name, span, _data, *mins = call.args
    dst_data = span.args[1].args[0] if isinstance(span.args[1], ir.Call) else span.args[1]
    name = next(n for n, b in ring.old.items() if b.same_as(dst_data))
    new = ring.new[name]
    numel = plan.rows * plan.cols
    out = []
    for box in plan.boxes:
        dst = tirx.tvm_access_ptr(
            tirx.type_annotation(plan.dtype),
            new.data,
            stage * numel + box.col,
            plan.box_rows * plan.box_cols,
            2,
        )
        tmap = tirx.call_extern("handle", map_param_name(tensor))
        # Coordinates innermost first: the box's column offset goes on the last dim.
        coords = [*mins[:-1], mins[-1] + box.col][::-1]
        out.append(_extern(f"tile_tma_load_{plan.rank}d", dst, tmap, full, *coords))
    return out


def _split_loop(loop: Any, func: Any, outside: set[Any], mbar_holder: list[Any]) -> tuple[Any, Any]:
    notes = _notes(loop)
    copies = int(notes["tile.num_stages"])
    ring = _ring(loop, outside, copies)
    if ring is None:
        raise TmaUnsupported("versioned buffers used outside the loop")
    maps = {str(k): v for k, v in func.attrs[TMA_MAPS_ATTR].items()}
    plans = {name: plan_from_json(dict(p)) for name, p in maps.items()}
    threads = int(func.attrs[WS_ATTR])
    mbar = tirx.decl_buffer((2 * copies,), "uint64", name=MBAR, scope="shared")
    mbar_holder.append((mbar, copies, threads))
    k = loop.loop_var
    stage = tirx.floormod(k - loop.min, copies)
    parity = tirx.Cast("uint32", tirx.floormod(tirx.floordiv(k - loop.min, copies), 2))
    full, empty = _bar(mbar, stage), _bar(mbar, stage + copies)

    producer: list[Any] = []
    consumer: list[Any] = [_extern("tile_mbarrier_wait", full, parity)]
    tx_bytes = 0
    for stmt in _body_list(loop):
        inner = stmt.body
        if isinstance(inner, tirx.AttrStmt) and str(inner.attr_key) == ASYNC_COPY:
            call = inner.body.value
            tensor = _tensor_name(func, call.args[2])
            plan = plans[tensor]
            tx_bytes += plan.tile_bytes
            producer += _tma_loads(call, plan, ring, stage, full, tensor)
            continue
        consumer.append(ring.remap(inner, stage))
    consumer.append(_extern("tile_mbarrier_arrive", empty))
    head = [
        _extern("tile_mbarrier_wait", empty, tirx.bitwise_xor(parity, tirx.const(1, "uint32"))),
        _extern("tile_mbarrier_arrive_expect_tx", full, tirx.const(tx_bytes, "uint32")),
    ]
    kp = tirx.Var(f"{k.name}_load", str(k.ty))  # each loop binds its own variable (SSA)
    producer_body = _substitute(_seq(head + producer), k, kp)
    producer_loop = tirx.For(kp, loop.min, loop.extent, tirx.ForKind.SERIAL, producer_body, None, None)
    consumer_loop = tirx.For(k, loop.min, loop.extent, tirx.ForKind.SERIAL, _seq(consumer), None, None,
                             span=loop.span)  # fmt: skip
    marked = tirx.AttrStmt(ir.StringImm(WS_PRODUCER), WS_PRODUCER, tirx.const(0, "int32"), producer_loop)
    return tirx.SeqStmt([marked, consumer_loop]), ring


def _tensor_name(func: Any, data: Any) -> str:
    if isinstance(data, ir.Call) and str(data.op.name) == "tirx.buffer_data":
        return str(data.args[0].name)
    for param in func.params:
        buffer = func.buffer_map.get(param) if hasattr(func, "buffer_map") else None
        if buffer is not None and buffer.data.same_as(data):
            return str(buffer.name)
        if param.same_as(data):
            return str(param.name)
    return str(getattr(data, "name", data))


def _ws_func(func: Any) -> Any:
    if func.attrs is None or WS_ATTR not in func.attrs:
        return func
    loops: list[Any] = []
    tvm_ffi.structural_walk(
        func.body, (tirx.For, lambda f: loops.append(f) if WS_LOOP in _notes(f) else None)
    )
    if len(loops) != 1:
        return func
    (loop,) = loops
    without = tvm_ffi.structural_map(
        func.body, (tirx.For, lambda o: tirx.Evaluate(0) if o.same_as(loop) else o)
    )
    holder: list[Any] = []
    split, ring = _split_loop(loop, func, _uses(without), holder)
    body = tvm_ffi.structural_map(func.body, (tirx.For, lambda f: split if f.same_as(loop) else f))
    replaced = {old: ring.new[name] for name, old in ring.old.items()}

    def on_alloc(node: Any) -> Any:
        for old, new in replaced.items():
            if node.buffer.same_as(old):
                return tirx.AllocBuffer(new, node.annotations)
        return node

    body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc))
    return func.with_body(body).with_attrs({WS_STAGES: holder[0][1]})


def warp_specialize_loop(mod: Any, ctx: CompileContext) -> Any:
    """Split the marked loop into producer and consumer loops over an mbarrier ring."""
    return map_prim_funcs(mod, _ws_func)


WARP_SPECIALIZE_LOOP = Pass("warp_specialize_loop", warp_specialize_loop)


# --------------------------------------------------------------------------- the branch
def consumer_registers(threads: int, producer: int) -> int:
    """Registers per consumer thread after ``setmaxnreg``: what the producer gives back, <= 240."""
    per = (NUM_REGISTERS - PRODUCER_THREADS * producer) // threads
    return min(240, per - per % 8)


def producer_registers(threads: int) -> int:
    return 40 if threads <= 256 else 24


def _mbar_buffer(body: Any) -> Any:
    found: list[Any] = []
    tvm_ffi.structural_walk(
        body, (ir.TensorLoad, lambda n: found.append(n.source) if str(n.source.name) == MBAR else None)
    )
    return found[0]


def _split_func(func: Any) -> Any:
    if func.attrs is None or WS_STAGES not in func.attrs:
        return func
    threads = int(func.attrs[WS_ATTR])
    copies = int(func.attrs[WS_STAGES])
    producers: list[Any] = []

    def take(node: Any) -> Any:
        if str(node.attr_key) == WS_PRODUCER:
            producers.append(node.body)
            return tirx.Evaluate(0)
        return node

    body = tvm_ffi.structural_map(func.body, (tirx.AttrStmt, take))
    if len(producers) != 1:
        raise TmaUnsupported(f"expected one producer loop, found {len(producers)}")
    resolved = _with_scalars(producers[0], body)
    if resolved is None:
        raise TmaUnsupported("the producer loop reads a scalar that loads from memory")
    producers[0] = resolved
    mbar = _mbar_buffer(func.body)
    total = threads + PRODUCER_THREADS
    give, take_regs = producer_registers(threads), consumer_registers(threads, producer_registers(threads))

    def on_attr(node: Any) -> Any:
        if not (str(node.attr_key) == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x"):
            return node
        tx = node.node.var
        stmts = list(node.body.seq) if isinstance(node.body, tirx.SeqStmt) else [node.body]
        allocs = []
        while stmts and isinstance(stmts[0], tirx.AllocBuffer):
            allocs.append(stmts.pop(0))
        init = [_extern("tile_mbarrier_init", _bar(mbar, i), tirx.const(1, "uint32")) for i in range(copies)]
        init += [
            _extern("tile_mbarrier_init", _bar(mbar, copies + i), tirx.const(threads, "uint32"))
            for i in range(copies)
        ]
        init.append(_extern("tile_fence_barrier_init"))
        producer = tirx.SeqStmt([
            _extern(f"tile_setmaxnreg_dec<{give}>"),
            tirx.IfThenElse(tx == threads, producers[0], None),
        ])  # fmt: skip
        synced = _synced(node, stmts, threads)
        consumer = tirx.SeqStmt([_extern(f"tile_setmaxnreg_inc<{take_regs}>"), *synced])
        new_body = tirx.SeqStmt([
            tirx.AllocBuffer(mbar),
            *allocs,
            tirx.IfThenElse(tx == 0, tirx.SeqStmt(init), None),
            _extern("tile_named_barrier_sync", tirx.const(0, "uint32"), tirx.const(total, "uint32")),
            tirx.IfThenElse(tx >= threads, producer, consumer),
        ])  # fmt: skip
        return tirx.AttrStmt(node.node, "thread_extent", tirx.const(total, "int32"), new_body)

    return func.with_body(tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr)))


def _synced(attr: Any, stmts: list[Any], threads: int) -> list[Any]:
    """The consumer's statements with the shared-memory barriers TVM's ThreadSync places.

    Inside the consumer branch (a condition on ``threadIdx.x``) TVM's ThreadSync refuses to
    insert a barrier, so it runs here on the consumer alone, as if it were the whole block
    of ``threads`` threads (the barriers become named barriers over those threads in
    ``finish_source``); the pass at build time then finds nothing left to synchronize.
    """
    body = tirx.AttrStmt(attr.node, "thread_extent", tirx.const(threads, "int32"), _seq(stmts))
    mod = tvm.IRModule({"consumer": tirx.PrimFunc([], body)})
    for scope in ("shared", "shared.dyn"):
        mod = tvm.s_tir.transform.ThreadSync(scope)(mod)
    synced = mod["consumer"].body.body
    return list(synced.seq) if isinstance(synced, tirx.SeqStmt) else [synced]


def split_producer_warps(mod: Any, ctx: CompileContext) -> Any:
    """Give a warp-specialized kernel its producer warpgroup (see module docstring)."""
    return map_prim_funcs(mod, _split_func)


SPLIT_PRODUCER_WARPS = Pass("split_producer_warps", split_producer_warps)


# --------------------------------------------------------------------------- source
def finish_source(source: str, kernel_name: str, threads: int) -> str:
    """Launch bounds with one block per SM, aligned dynamic shared memory, consumer-only barriers."""
    total = threads + PRODUCER_THREADS
    source, count = re.subn(
        r"__launch_bounds__\((\d+)\) " + re.escape(kernel_name) + r"\(",
        f"__launch_bounds__({total}, 1) {kernel_name}(",
        source,
    )
    if count != 1:
        raise TmaUnsupported(f"kernel {kernel_name} has no __launch_bounds__ to extend")
    source = re.sub(r"extern __shared__ __align__\(\d+\)", "extern __shared__ __align__(1024)", source)
    return source.replace("__syncthreads();", f"tile_named_barrier_sync(1u, {threads}u);")


def warp_specialize_requested(target: Target) -> bool:
    """Whether the pipeline for ``target`` gets the warp-specialization passes (what the kernel
    cache entry records, since the env var is not in its key)."""
    from .hopper import wgmma_available
    from .tma import warp_specialize_enabled

    return bool(wgmma_available(target)) and warp_specialize_enabled(target)


def with_warp_specialize(passes: Sequence[Pass], target: Target) -> list[Pass]:
    """``passes`` plus the warp-specialization passes when ``target`` asks for them (sm_90a)."""
    names = [p.name for p in passes]
    if not warp_specialize_requested(target) or MARK_TMA_COPIES.name in names:
        return list(passes)
    if "mark_pipeline_statements" not in names or "pipeline_async_copies" not in names:
        return list(passes)
    out: list[Pass] = []
    for step in passes:
        if step.name == "pipeline_async_copies":
            out.append(WARP_SPECIALIZE_LOOP)
        out.append(step)
        if step.name == "mark_pipeline_statements":
            out.append(MARK_TMA_COPIES)
    out.append(SPLIT_PRODUCER_WARPS)
    return out


__all__ = [
    "MARK_TMA_COPIES",
    "SPLIT_PRODUCER_WARPS",
    "WARP_SPECIALIZE_LOOP",
    "WS_ATTR",
    "consumer_registers",
    "finish_source",
    "producer_registers",
    "warp_specialize_requested",
    "with_warp_specialize",
]
