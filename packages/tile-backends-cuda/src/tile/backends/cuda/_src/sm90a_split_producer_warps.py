"""Pass ``split_producer_warps`` (sm_90a, after every other lowering).

The block gets 128 more threads; threads
``[T, T + 128)`` form the producer warpgroup, so the user's threads keep their
indices ``0..T-1``. Thread 0 initialises the barriers (``full`` expects one arrival
plus the bytes, ``empty`` expects ``T``) while the producer's thread ``T`` prefetches the
tensor maps its loads read (``prefetch.tensormap``: the first TMA load of each map then
finds it cached instead of fetching its 128 bytes from global memory), a CTA-wide barrier
publishes the barriers, then ``setmaxnreg`` moves registers from the producer warpgroup to
the consumers. The shared tiles the producer never touches are allocated inside the
consumer branch, so that those with disjoint lifetimes there share bytes
(``_consumer_only_shared``).

What the source must say beyond the body is stated in the IR for code generation:
``__launch_bounds__(T + 128, 1)`` (setmaxnreg needs the registers of one block per SM)
as an ``annotations.MIN_BLOCKS_PER_SM`` statement, and as function attributes the
consumers' barriers (``annotations.NAMED_BARRIER_THREADS``: ``__syncthreads()`` would
wait for the producer warps, which never reach it) and the 1024-byte alignment of the
dynamic shared memory (``annotations.DYNAMIC_SHARED_ALIGN``: 128B swizzle periods).
"""

from __future__ import annotations

import re
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm.s_tir  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.annotations import DYNAMIC_SHARED_ALIGN, MIN_BLOCKS_PER_SM, NAMED_BARRIER_THREADS
from tile.ir.gpu.statements import extern_call as _extern
from tile.ir.gpu.statements import seq as _seq
from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs
from tile.ir.transform.properties import FRAGMENTS_LOWERED, SHARED_LAYOUTS_APPLIED, statements_without

from .sm90a_warp_specialize_loop import LOOP_WARP_SPECIALIZED
from .tma import TmaUnsupported
from .warp_specialize import (
    MBAR,
    NUM_REGISTERS,
    PRODUCER_THREADS,
    WS_ATTR,
    WS_ONCE,
    WS_PRODUCER,
    WS_STAGES,
    mbarrier_address,
    with_block_scalars,
)


def consumer_registers(threads: int, producer: int) -> int:
    """Registers per consumer thread after ``setmaxnreg``: what the producer gives back, <= 240."""
    per = (NUM_REGISTERS - PRODUCER_THREADS * producer) // threads
    return min(240, per - per % 8)


def producer_registers(threads: int) -> int:
    return 40 if threads <= 256 else 24


_TMA_COPY = re.compile(r"tile_tma_(load|store)_[2-5]d$")


def _tensor_maps(*stmts: Any) -> list[Any]:
    """The tensor-map operands of the TMA loads and stores in ``stmts``, one per map, in first-use order."""
    maps: dict[str, Any] = {}

    def on_call(call: Any) -> None:
        if str(call.op.name) != "tirx.call_extern":
            return
        if not _TMA_COPY.match(str(call.args[0].value)):
            return
        tmap = call.args[2]  # a map_param_name placeholder: call_extern("handle", "tile_tmap_X")
        maps.setdefault(str(tmap.args[0].value), tmap)

    for stmt in stmts:
        tvm_ffi.structural_walk(stmt, (ir.Call, on_call))
    return list(maps.values())


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
    once = int(func.attrs.get(WS_ONCE, 0))
    producers: list[Any] = []

    def take(node: Any) -> Any:
        if str(node.attr_key) == WS_PRODUCER:
            producers.append(node.body)
            return tirx.Evaluate(0)
        return node

    mbar = _mbar_buffer(func.body)

    def drop_mbar_alloc(node: Any) -> Any:  # warp_specialize_loop's; allocated at the top below
        return tirx.Evaluate(0) if node.buffer.same_as(mbar) else node

    body = tvm_ffi.structural_map(func.body, [(tirx.AttrStmt, take), (tirx.AllocBuffer, drop_mbar_alloc)])
    if len(producers) != 1:
        raise TmaUnsupported(f"expected one producer loop, found {len(producers)}")
    resolved = with_block_scalars(producers[0], body)
    if resolved is None:
        raise TmaUnsupported("the producer loop reads a scalar that loads from memory")
    producers[0] = resolved
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
        allocs, consumer_only = _consumer_only_shared(allocs, producers[0])
        init = [
            _extern("tile_mbarrier_init", mbarrier_address(mbar, i), tirx.const(1, "uint32"))
            for i in range(copies)
        ]
        init += [
            _extern("tile_mbarrier_init", mbarrier_address(mbar, copies + i), tirx.const(threads, "uint32"))
            for i in range(copies)
        ]
        init += [  # the tiles loaded once: the producer's one arrival plus their bytes
            _extern("tile_mbarrier_init", mbarrier_address(mbar, 2 * copies + i), tirx.const(1, "uint32"))
            for i in range(once)
        ]
        init.append(_extern("tile_fence_barrier_init"))
        prefetch = [_extern("tile_tma_prefetch_map", tmap) for tmap in _tensor_maps(producers[0], *stmts)]
        producer = tirx.SeqStmt([
            _extern(f"tile_setmaxnreg_dec<{give}>"),
            tirx.IfThenElse(tx == threads, producers[0], None),
        ])  # fmt: skip
        synced = _synced(node, stmts, threads)
        consumer = tirx.SeqStmt([*consumer_only, _extern(f"tile_setmaxnreg_inc<{take_regs}>"), *synced])
        new_body = tirx.SeqStmt([
            tirx.AllocBuffer(mbar),
            *allocs,
            tirx.IfThenElse(tx == 0, tirx.SeqStmt(init), None),
            *([tirx.IfThenElse(tx == threads, _seq(prefetch), None)] if prefetch else []),
            _extern("tile_named_barrier_sync", tirx.const(0, "uint32"), tirx.const(total, "uint32")),
            tirx.IfThenElse(tx >= threads, producer, consumer),
        ])  # fmt: skip
        # setmaxnreg needs the register budget of one block per SM: __launch_bounds__(total, 1)
        bounded = tirx.AttrStmt(
            ir.StringImm(MIN_BLOCKS_PER_SM), MIN_BLOCKS_PER_SM, tirx.const(1, "int32"), new_body
        )
        return tirx.AttrStmt(node.node, "thread_extent", tirx.const(total, "int32"), bounded)

    body = tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr))
    # for code generation: barriers over the consumers only, swizzle periods on 1024 bytes
    return func.with_body(body).with_attrs({NAMED_BARRIER_THREADS: threads, DYNAMIC_SHARED_ALIGN: 1024})


def _consumer_only_shared(allocs: list[Any], producer: Any) -> tuple[list[Any], list[Any]]:
    """``allocs`` split into (kept at the block's top, moved into the consumer branch).

    A shared buffer the producer never touches moves into the consumer branch. TVM's
    ``MergeSharedMemoryAllocations`` attributes each access to the statement, at the level of
    the buffer's allocation, that contains it: allocated at the top, every buffer the
    consumer touches is live for the whole producer/consumer ``if`` and none shares bytes
    (an MLA decoder's ``O_shared`` would not reuse ``Q_shared``'s). Allocated in the consumer
    branch, buffers whose accesses are disjoint there share bytes as on sm_80, while the
    ring the producer fills stays live across the branch. The consumer's barriers
    (``_synced``: TVM's ThreadSync counts the dynamic buffers as one memory) order the last
    read of one buffer before the first write of the next.
    """
    touched: list[Any] = []  # every buffer it names (a TMA load passes its tile by address)
    tvm_ffi.structural_walk(producer, (tirx.Var, touched.append))
    kept: list[Any] = []
    moved: list[Any] = []
    for alloc in allocs:
        buffer = alloc.buffer
        shared = str(buffer.scope()).startswith("shared")
        (moved if shared and not any(buffer.same_as(v) for v in touched) else kept).append(alloc)
    return kept, moved


def _synced(attr: Any, stmts: list[Any], threads: int) -> list[Any]:
    """The consumer's statements with the shared-memory barriers TVM's ThreadSync places.

    Inside the consumer branch (a condition on ``threadIdx.x``) TVM's ThreadSync refuses to
    insert a barrier, so it runs here on the consumer alone, as if it were the whole block
    of ``threads`` threads (code generation puts them on a named barrier over those threads:
    ``annotations.NAMED_BARRIER_THREADS``); TVM's pass at build time then finds nothing left
    to synchronize.
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


PRODUCER_WARPS_SPLIT = Property(
    "producer_warps_split",
    "a warp-specialized kernel's block has its producer warpgroup, barriers and register split",
    check=statements_without(WS_PRODUCER),
)
SPLIT_PRODUCER_WARPS = Pass(
    "split_producer_warps",
    split_producer_warps,
    needs={LOOP_WARP_SPECIALIZED, FRAGMENTS_LOWERED, SHARED_LAYOUTS_APPLIED},
    guarantees={PRODUCER_WARPS_SPLIT},
)

__all__ = [
    "PRODUCER_WARPS_SPLIT",
    "SPLIT_PRODUCER_WARPS",
    "consumer_registers",
    "producer_registers",
    "split_producer_warps",
]
