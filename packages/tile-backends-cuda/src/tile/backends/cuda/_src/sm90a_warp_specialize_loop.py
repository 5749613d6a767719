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
proxy with no fence since.)
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
from .warp_specialize import MBAR, WS_ATTR, WS_LOOP, WS_PRODUCER, WS_STAGES, mbarrier_address


def _tma_loads(call: Any, plan: BoxPlan, ring: Any, stage: Any, full: Any, tensor: str) -> list[Any]:
    """One ``tile_tma_load_<rank>d`` per box of the placeholder ``call`` into ``stage``."""
    _name, _span, _data, *mins = call.args
    new = ring.new[_destination(call, ring)]
    numel = math.prod(int(d) for d in new.shape[1:])  # one stage, padded by _aligned_stages
    out = []
    for box in plan.boxes:
        dst = tirx.tvm_access_ptr(
            # the ring's own element type: legalize_fp8 has made an fp8 ring a byte buffer
            tirx.type_annotation(str(new.dtype)),
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


PROXY_FENCE = "tile_fence_proxy_async"
# Device-header calls that write no shared memory through the generic proxy: wgmma, fences,
# mbarriers, and the warp shuffles of a row reduction (register to register; FlashAttention's
# row max and sum are nothing else, and kept a fence on every K step while they counted).
_NO_GENERIC_SHARED_WRITES = ("tile_wgmma_", "tile_mbarrier_", PROXY_FENCE, "tile::shfl_")


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


def _split_loop(loop: Any, func: Any, outside: set[Any], mbar_holder: list[Any]) -> tuple[Any, Any]:
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
    mbar = tirx.decl_buffer((2 * per_kind,), "uint64", name=MBAR, scope="shared")
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
    before = [_extern(PROXY_FENCE)] if fenced else []
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
