"""Pass ``warp_specialize_loop`` (sm_90a, before ``pipeline_async_copies``, which then
no longer sees the loop).

The loop becomes two loops over the same iterations ``k``, stage
``s = k % num_stages`` of each versioned buffer, phase parity ``(k / num_stages) & 1``.
The TMA copies form groups, one per consumer statement that first reads a copied tile
(a GEMM's A and B: one group; FlashAttention's K and V: two, read by the two gemms), and
each group ``g`` has its own barriers ``full[g][s]`` and ``empty[g][s]``: the consumer
loop runs the loop's other statements in their order, waits on ``full[g][s]`` just before
the first statement that reads the group's tiles and arrives on ``empty[g][s]`` just after
the last one (every consumer thread; a gemm's wgmma has waited for its shared reads by
then); the producer loop (one elected thread) waits, group by group, on ``empty[g][s]``
with the opposite parity (a fresh barrier passes), announces the group's bytes with
``arrive_expect_tx(full[g][s])`` and issues one TMA load per box. So attention's Q K^T
starts once K has landed, without waiting for V, and K's stage is handed back to the
producer as soon as Q K^T has read it. TMA fills out-of-bound elements with zeros, so
ragged tails need no predicate. Barrier ``g * num_stages + s`` is ``full[g][s]``; the
``empty`` ones follow all the ``full`` ones (``WS_STAGES`` counts each kind).

A consumer loop that writes no shared memory itself (no store into a shared buffer, no
call into the device header other than wgmma, fence, mbarrier and warp-shuffle ones) gets
the wgmma lowering's ``fence.proxy.async`` once, before the loop, instead of on every iteration:
its wgmma operands are then written only by TMA, in the async proxy that wgmma reads
through, and the one fence still orders any generic writes made before the loop. (The
emulator models the two proxies and reports a wgmma read of bytes written by the generic
proxy with no fence since.) Where nothing before the loop writes shared memory generically
either (the tiles loaded once came by TMA), the fence goes altogether.

The tiles loaded once before the loop (``TMA_ONCE``) and stored after it (``TMA_STORE``)
are lowered here too: see ``_OnceTiles`` and ``_tma_store``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.annotations import NUM_STAGES
from tile.ir.gpu.async_ring import ASYNC_COPY
from tile.ir.gpu.async_ring import body_statements as _body_list
from tile.ir.gpu.async_ring import buffer_uses as _uses
from tile.ir.gpu.async_ring import loop_notes as _notes
from tile.ir.gpu.async_ring import substitute as _substitute
from tile.ir.gpu.async_ring import versioned_ring as _ring
from tile.ir.gpu.statements import extern_call as _extern
from tile.ir.gpu.statements import seq as _seq
from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs
from tile.ir.transform.properties import PIPELINED_LOOPS, TILE_OPS_LOWERED, loops_without

from .codegen import TMA_MAPS_ATTR
from .sm90a_mark_tma_copies import TMA_COPIES_MARKED
from .tma import ELEMENT_BYTES, BoxPlan, TmaUnsupported, map_param_name, plan_from_json
from .warp_specialize import (
    MBAR,
    TMA_ONCE,
    TMA_STORE,
    WS_ATTR,
    WS_LOOP,
    WS_ONCE,
    WS_PRODUCER,
    WS_STAGES,
    mbarrier_address,
)


def _tma_boxes(tile: Any, plan: BoxPlan, base: Any, mins: list[Any], rw: int) -> list[tuple[Any, list[Any]]]:
    """``(shared pointer, coordinates)`` of each box of ``plan`` in the tile that starts ``base``
    elements into buffer ``tile``, at tensor origin ``mins`` (``rw``: the pointer's access)."""
    out = []
    for box in plan.boxes:
        # the buffer's own element type: legalize_fp8 has made an fp8 tile a byte buffer
        ptr = tirx.tvm_access_ptr(tirx.type_annotation(str(tile.dtype)), tile.data, base + box.col,
                                  plan.box_rows * plan.box_cols, rw)  # fmt: skip
        # Coordinates innermost first: the box's column offset goes on the last dim.
        out.append((ptr, [*mins[:-1], mins[-1] + box.col][::-1]))
    return out


def _tma_loads(call: Any, plan: BoxPlan, ring: Any, stage: Any, full: Any, tensor: str) -> list[Any]:
    """One ``tile_tma_load_<rank>d`` per box of the placeholder ``call`` into ``stage``."""
    _name, _span, _data, *mins = call.args
    new = ring.new[_destination(call, ring)]
    numel = math.prod(int(d) for d in new.shape[1:])  # one stage, padded by _aligned_stages
    tmap = tirx.call_extern("handle", map_param_name(tensor))
    return [
        _extern(f"tile_tma_load_{plan.rank}d", dst, tmap, full, *coords)
        for dst, coords in _tma_boxes(new, plan, stage * numel, mins, 2)
    ]


def _placeholder_tile(call: Any) -> Any:
    """The shared buffer a placeholder's span (``tvm_access_ptr``) points into."""
    data = call.args[1].args[1]
    return data.args[0] if isinstance(data, ir.Call) else data


@dataclasses.dataclass
class _OnceTiles:
    """The tiles loaded once before the loop (``TMA_ONCE``), on one mbarrier of their own: where
    the first copy was, one consumer thread announces their bytes and issues their loads, and
    every consumer waits. (Issued by the producer, a tile would be named in both branches and
    so allocated above them, where TVM's merge keeps it live for the whole kernel: an epilogue
    tile could not reuse its bytes.)"""

    func: Any
    loads: list[Any]  # the placeholder calls, in program order
    generic_writes_before: bool
    """Whether a statement before the loop may write shared memory through the generic proxy
    (then the fence hoisted out of the loop stays; without, every tile the loop's wgmmas read
    was written by TMA)."""

    @property
    def barriers(self) -> int:
        return 1 if self.loads else 0

    def issue(self, bar: Any, plans: dict[str, BoxPlan], thread: Any) -> list[Any]:
        """What replaces the first placeholder: the loads of them all, then the wait."""
        loads: list[Any] = []
        total = 0
        for call in self.loads:
            tensor = _tensor_name(self.func, call.args[2])
            plan = plans[tensor]
            total += plan.tile_bytes
            tmap = tirx.call_extern("handle", map_param_name(tensor))
            loads += [
                _extern(f"tile_tma_load_{plan.rank}d", dst, tmap, bar, *coords)
                for dst, coords in _tma_boxes(_placeholder_tile(call), plan, 0, list(call.args[3:]), 2)
            ]
        announce = _extern("tile_mbarrier_arrive_expect_tx", bar, tirx.const(total, "uint32"))
        return [
            tirx.IfThenElse(thread == 0, tirx.SeqStmt([announce, *loads]), None),
            _extern("tile_mbarrier_wait", bar, tirx.const(0, "uint32")),
        ]


def _tma_store(call: Any, plan: BoxPlan, tensor: str, thread: Any) -> list[Any]:
    """A ``TMA_STORE`` placeholder lowered: every consumer thread fences its generic writes of the
    tile for the async proxy (ThreadSync then puts the consumers' barrier after the fences), one
    thread stores the boxes and waits until they have read the tile, so whatever writes the tile
    next (after the next barrier) cannot change it under the copy."""
    tmap = tirx.call_extern("handle", map_param_name(tensor))
    stores = [
        _extern(f"tile_tma_store_{plan.rank}d", src, tmap, *coords)
        for src, coords in _tma_boxes(_placeholder_tile(call), plan, 0, list(call.args[3:]), 1)
    ]
    issue = tirx.SeqStmt([*stores, _extern("tile_tma_store_commit"), _extern("tile_tma_store_wait_read<0>")])
    return [_extern(PROXY_FENCE), tirx.IfThenElse(thread == 0, issue, None)]


PROXY_FENCE = "tile_fence_proxy_async"
# Device-header calls that write no shared memory through the generic proxy: wgmma, fences,
# mbarriers, and the warp shuffles of a row reduction (register to register; FlashAttention's
# row max and sum are nothing else, and kept a fence on every K step while they counted).
_NO_GENERIC_SHARED_WRITES = ("tile_wgmma_", "tile_mbarrier_", PROXY_FENCE, "tile::shfl_", TMA_ONCE)


def _extern_name(node: Any) -> str | None:
    value = node.value if isinstance(node, tirx.Evaluate) else node
    if isinstance(value, ir.Call) and str(value.op.name) == "tirx.call_extern":
        return str(value.args[0].value)
    return None


def _writes_shared_generically(stmts: list[Any]) -> bool:
    """Whether ``stmts`` may store to shared memory through the generic proxy (conservative)."""
    found: list[bool] = []

    def on_store(store: Any) -> None:
        if str(store.buffer.scope()).startswith("shared"):
            found.append(True)

    def on_call(call: Any) -> None:
        name = _extern_name(call)
        if name is not None and not name.startswith(_NO_GENERIC_SHARED_WRITES):
            found.append(True)

    for stmt in stmts:
        tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, on_store), (ir.Call, on_call)])
    return bool(found)


def _hoist_proxy_fences(consumer: list[Any]) -> tuple[list[Any], bool]:
    """``consumer`` without its proxy fences, and whether it had any (module docstring)."""
    if _writes_shared_generically(consumer):
        return consumer, False
    hoisted: list[bool] = []

    def on_evaluate(node: Any) -> Any:
        if _extern_name(node) == PROXY_FENCE:
            hoisted.append(True)
            return tirx.Evaluate(tirx.const(0, "int32"))
        return node

    return [tvm_ffi.structural_map(stmt, (tirx.Evaluate, on_evaluate)) for stmt in consumer], bool(hoisted)


def _destination(call: Any, ring: Any) -> str:
    """The name of the ring buffer a TMA placeholder ``call`` loads into."""
    span = call.args[1]
    dst_data = span.args[1].args[0] if isinstance(span.args[1], ir.Call) else span.args[1]
    return next(n for n, b in ring.old.items() if b.same_as(dst_data))


def _aligned_stages(ring: Any, aligns: dict[str, int]) -> Any:
    """``ring`` with each TMA destination's stage padded to a multiple of its alignment.

    TMA writes shared memory only at ``BoxPlan.smem_align``-byte aligned addresses (128
    for a dense tile). Stage ``s`` of a ring buffer starts ``s`` stages into it, so a
    stage whose bytes are not a multiple of that (a 2 x 16 int8 tile is 32 bytes) puts
    every later stage off it: its first tile dim grows to the next multiple of the rows
    one aligned period holds (the extra rows are never read). The buffer's own start is
    aligned by ``data_alignment``.
    """
    new = dict(ring.new)
    for name, align in aligns.items():
        buffer = ring.new[name]
        copies, rows, *rest = (int(d) for d in buffer.shape)
        row_bytes = math.prod(rest) * ELEMENT_BYTES[str(buffer.dtype)]
        period = align // math.gcd(align, row_bytes)  # rows whose bytes are a multiple of align
        padded = -(-rows // period) * period
        new[name] = tirx.decl_buffer(
            (copies, padded, *rest), str(buffer.dtype), name=name, scope=str(buffer.scope()),
            data_alignment=align,
        )
    return dataclasses.replace(ring, new=new)


def _split_loop(
    loop: Any, func: Any, outside: set[Any], mbar_holder: list[Any], once: _OnceTiles
) -> tuple[Any, Any]:
    notes = _notes(loop)
    copies = int(notes[NUM_STAGES])
    ring = _ring(loop, outside, copies)
    if ring is None:
        raise TmaUnsupported("versioned buffers used outside the loop")
    maps = {str(k): v for k, v in func.attrs[TMA_MAPS_ATTR].items()}
    plans = {name: plan_from_json(dict(p)) for name, p in maps.items()}
    aligns: dict[str, int] = {}
    for stmt in _body_list(loop):
        if _is_async_copy(stmt):
            call = stmt.body.body.value
            plan = plans[_tensor_name(func, call.args[2])]
            name = _destination(call, ring)
            aligns[name] = max(aligns.get(name, 1), plan.smem_align)
    ring = _aligned_stages(ring, aligns)
    threads = int(func.attrs[WS_ATTR])
    body = _body_list(loop)
    copy_stmts = {i for i, stmt in enumerate(body) if _is_async_copy(stmt)}
    readers = [i for i in range(len(body)) if i not in copy_stmts]
    groups = _copy_groups(body, copy_stmts, readers, ring)
    per_kind = copies * len(groups)
    mbar = tirx.decl_buffer((2 * per_kind + once.barriers,), "uint64", name=MBAR, scope="shared")
    mbar_holder.append((mbar, per_kind, threads))
    k = loop.loop_var
    stage = tirx.floormod(k - loop.min, copies)
    parity = tirx.Cast("uint32", tirx.floormod(tirx.floordiv(k - loop.min, copies), 2))

    def full(g: int) -> Any:
        return mbarrier_address(mbar, g * copies + stage)

    def empty(g: int) -> Any:
        return mbarrier_address(mbar, per_kind + g * copies + stage)

    producer: list[Any] = []
    for g, group in enumerate(groups):
        loads: list[Any] = []
        tx_bytes = 0
        for i in group.copies:
            call = body[i].body.body.value
            tensor = _tensor_name(func, call.args[2])
            plan = plans[tensor]
            tx_bytes += plan.tile_bytes
            loads += _tma_loads(call, plan, ring, stage, full(g), tensor)
        producer += [
            _extern("tile_mbarrier_wait", empty(g), tirx.bitwise_xor(parity, tirx.const(1, "uint32"))),
            _extern("tile_mbarrier_arrive_expect_tx", full(g), tirx.const(tx_bytes, "uint32")),
            *loads,
        ]
    consumer = [_extern("tile_mbarrier_wait", full(g), parity) for g, x in enumerate(groups) if x.first < 0]
    for i in readers:
        starts = [g for g, group in enumerate(groups) if group.first == i]
        ends = [g for g, group in enumerate(groups) if group.last == i]
        consumer += [_extern("tile_mbarrier_wait", full(g), parity) for g in starts]
        consumer.append(ring.remap(body[i].body, stage))
        consumer += [_extern("tile_mbarrier_arrive", empty(g)) for g in ends]
    consumer += [_extern("tile_mbarrier_arrive", empty(g)) for g, x in enumerate(groups) if x.last < 0]
    consumer, fenced = _hoist_proxy_fences(consumer)
    kp = tirx.Var(f"{k.name}_load", str(k.ty))  # each loop binds its own variable (SSA)
    producer_body = _substitute(_seq(producer), k, kp)
    producer_loop = tirx.For(kp, loop.min, loop.extent, tirx.ForKind.SERIAL, producer_body, None, None)

    consumer_loop = tirx.For(k, loop.min, loop.extent, tirx.ForKind.SERIAL, _seq(consumer), None, None,
                             span=loop.span)  # fmt: skip
    marked = tirx.AttrStmt(ir.StringImm(WS_PRODUCER), WS_PRODUCER, tirx.const(0, "int32"), producer_loop)
    before = [_extern(PROXY_FENCE)] if fenced and once.generic_writes_before else []
    # the ring's barriers are declared where they are first used, so the IR between this pass
    # and split_producer_warps (which moves the allocation to the block's top) is well formed
    return tirx.SeqStmt([tirx.AllocBuffer(mbar), marked, *before, consumer_loop]), ring


def _is_async_copy(stmt: Any) -> bool:
    inner = stmt.body
    return isinstance(inner, tirx.AttrStmt) and str(inner.attr_key) == ASYNC_COPY


def _names_used(stmt: Any) -> set[str]:
    """The names of the buffers ``stmt`` loads, stores or takes the address of."""
    return {str(b.name) for b in _uses(stmt)}


_WHOLE_BODY = -1  # a group's first and last reader in a loop body of copies alone


@dataclasses.dataclass
class _CopyGroup:
    """TMA copies first read by the same consumer statement: one barrier pair per stage."""

    copies: list[int]  # body indices of the copies, in program order
    first: int  # body index of the first consumer statement reading them (its wait goes before)
    last: int  # ... of the last one (its arrive on the empty barrier goes after)


def _copy_groups(body: list[Any], copy_stmts: set[int], readers: list[int], ring: Any) -> list[_CopyGroup]:
    """The copies of ``body`` grouped by their first reader (module docstring).

    A tile no consumer statement reads (a copy whose result is unused) is waited for before
    the first statement and released after the last, as when every copy shared one barrier
    (in a loop of copies alone: at the top and the bottom of the consumer's empty body).
    """
    uses = {i: _names_used(body[i].body) for i in readers}
    by_first: dict[int, _CopyGroup] = {}
    for i in sorted(copy_stmts):
        dst = _destination(body[i].body.body.value, ring)
        reading = [j for j in readers if dst in uses[j]] or readers
        first, last = (reading[0], reading[-1]) if reading else (_WHOLE_BODY, _WHOLE_BODY)
        group = by_first.setdefault(first, _CopyGroup([], first, last))
        group.copies.append(i)
        group.last = max(group.last, last)
    return list(by_first.values())


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


def _statements_before(body: Any, loop: Any) -> list[Any] | None:
    """The statements before ``loop`` in the statement list that holds it (None: not in one)."""
    found: list[list[Any]] = []

    def on_seq(seq: Any) -> None:
        stmts = list(seq.seq)
        at = next((i for i, stmt in enumerate(stmts) if stmt.same_as(loop)), None)
        if at is not None:
            found.append(stmts[:at])

    tvm_ffi.structural_walk(body, (tirx.SeqStmt, on_seq))
    return found[0] if found else None


def _thread_x(body: Any) -> Any:
    found: list[Any] = []

    def on_attr(node: Any) -> None:
        if str(node.attr_key) == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x":
            found.append(node.node.var)

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, on_attr))
    return found[0]


def _placeholders(body: Any, name: str) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.Evaluate, lambda node: found.append(node.value)
                                   if _extern_name(node) == name else None), order="pre")  # fmt: skip
    return found


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
    before = _statements_before(func.body, loop)
    once = _OnceTiles(func, _placeholders(func.body, TMA_ONCE),
                      before is None or _writes_shared_generically(before))  # fmt: skip
    holder: list[Any] = []
    split, ring = _split_loop(loop, func, _uses(without), holder, once)
    body = tvm_ffi.structural_map(func.body, (tirx.For, lambda f: split if f.same_as(loop) else f))
    replaced = {old: ring.new[name] for name, old in ring.old.items()}

    def on_alloc(node: Any) -> Any:
        for old, new in replaced.items():
            if node.buffer.same_as(old):
                return tirx.AllocBuffer(new, node.annotations)
        return node

    mbar, per_kind, _threads = holder[0]
    plans = {str(k): plan_from_json(dict(v)) for k, v in func.attrs[TMA_MAPS_ATTR].items()}
    thread = _thread_x(func.body)
    waited: list[bool] = []

    def on_evaluate(node: Any) -> Any:
        name = _extern_name(node)
        if name == TMA_ONCE:  # every tile loaded once is issued and waited for where the first was
            first = not waited
            waited.append(True)
            bar = mbarrier_address(mbar, 2 * per_kind)
            return _seq(once.issue(bar, plans, thread)) if first else tirx.Evaluate(0)
        if name == TMA_STORE:
            tensor = _tensor_name(func, node.value.args[2])
            return _seq(_tma_store(node.value, plans[tensor], tensor, thread))
        return node

    body = tvm_ffi.structural_map(body, [(tirx.AllocBuffer, on_alloc), (tirx.Evaluate, on_evaluate)])
    return func.with_body(body).with_attrs({WS_STAGES: per_kind, WS_ONCE: once.barriers})


def warp_specialize_loop(mod: Any, ctx: CompileContext) -> Any:
    """Split the marked loop into producer and consumer loops over an mbarrier ring."""
    return map_prim_funcs(mod, _ws_func)


LOOP_WARP_SPECIALIZED = Property(
    "loop_warp_specialized",
    "the marked loop is a producer loop of TMA loads and a consumer loop over an mbarrier ring",
    check=loops_without(WS_LOOP),
)
WARP_SPECIALIZE_LOOP = Pass(
    "warp_specialize_loop",
    warp_specialize_loop,
    needs={TMA_COPIES_MARKED, TILE_OPS_LOWERED, PIPELINED_LOOPS},
    guarantees={LOOP_WARP_SPECIALIZED},
)

__all__ = ["LOOP_WARP_SPECIALIZED", "WARP_SPECIALIZE_LOOP", "warp_specialize_loop"]
