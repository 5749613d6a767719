"""sm_90a ``T.Pipelined`` on TMA + mbarriers with a producer warpgroup (default on).

On for sm_90a unless the kernel turns it off (``pass_configs={"tl.disable_warp_specialized":
True}`` or the target option ``{"warp_specialize": "0"}``) or ``TILE_CUDA_WARP_SPECIALIZE=0``
does for every kernel (``tma.warp_specialize_enabled``); off, the sm_90a pipeline is
exactly the cp.async ring of ``sm80_pipeline_async_copies``, and so is any kernel that does not
qualify (see ``sm90a_mark_tma_copies``).

The passes, in pipeline order (each in its own module, each a no-op on a kernel that
does not qualify): ``sm90a_mark_tma_copies`` (before ``lower_tile_ops``),
``sm90a_warp_specialize_loop`` (before ``pipeline_async_copies``, which then no
longer sees the loop) and ``sm90a_split_producer_warps`` (after every other
lowering). This module holds what they share: the attribute names, the mbarrier
addressing, the block scalars the producer recomputes, and the switch.

``sm90a_split_producer_warps`` also states in the IR what the kernel's source needs beyond
its body (launch bounds, named barriers for the consumers, the alignment of the dynamic
shared memory) and ``sm90a_mark_tma_copies`` which tensor maps it reads; code generation
(``codegen.py``) emits them. No generated source is edited afterwards.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.target import Target

WS_ATTR = "tile.warp_specialized"
"""PrimFunc attr: the user's thread count ``T`` of a warp-specialized kernel."""
WS_LOOP = "tile.warp_specialize"
WS_PRODUCER = "tile.ws_producer"
WS_STAGES = "tile.ws_stages"
MBAR = "tile_mbar"
TMA_TILE = "tile_tma_tile"
TMA_ONCE = "tile_tma_tile_once"
"""Placeholder of a tile loaded once before the warp-specialized loop (the producer loads it first)."""
TMA_STORE = "tile_tma_store_tile"
"""Placeholder of a shared tile stored to a tensor after the loop (one consumer thread, by TMA)."""
WS_ONCE = "tile.ws_once_barriers"
"""PrimFunc attr: mbarriers after the ring's (each expects one arrival) for the tiles loaded once."""
PRODUCER_THREADS = 128
NUM_REGISTERS = 65536


def mbarrier_address(mbar: Any, index: Any) -> Any:
    """``&mbar[index]``: the address the ``tile_mbarrier_*`` calls take."""
    return tirx.address_of(tirx.BufferLoad(mbar, [index]))


def _block_scalars(body: Any) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
    """The block's straight-line scalars: ``([(let var, value)], {buffer name: value})``.

    A ``Bind`` (let), or a 1-element local buffer set outside any loop and any condition
    (``loop_range = ...`` in a tile program becomes such a buffer) before anything else reads
    it. Set several times (``steps = ...`` then ``if causal: steps = T.min(steps, ...)`` with
    a Python ``causal``), its value is the last store's, each store's reads of the buffer
    replaced by the value before it. The producer loop leaves the consumer branch, where
    these are set, so it reads their values instead (attention's causal ``loop_range``).
    """
    lets: list[tuple[Any, Any]] = []
    stores: dict[str, list[Any]] = {}
    unordered: set[str] = set()  # set in a loop or under a condition
    scalars: set[str] = set()
    # ("store" | "load", buffer name) in program order, a store after the loads in its value
    # (structural_walk visits a node after its children)
    events: list[tuple[str, str]] = []

    def on_alloc(node: Any) -> None:
        buf = node.buffer
        if str(buf.scope()) == "local" and [int(d) for d in buf.shape if isinstance(d, tirx.IntImm)] == [1]:
            scalars.add(str(buf.name))

    def stored_under(node: Any) -> None:
        tvm_ffi.structural_walk(node, (tirx.BufferStore, lambda st: unordered.add(str(st.buffer.name))))

    def on_store(store: Any) -> None:
        stores.setdefault(str(store.buffer.name), []).append(store)
        events.append(("store", str(store.buffer.name)))

    tvm_ffi.structural_walk(body, [
        (tirx.AllocBuffer, on_alloc),
        (tirx.For, lambda loop: stored_under(loop.body)),
        (tirx.IfThenElse, stored_under),
        (tirx.BufferStore, on_store),
        (ir.TensorLoad, lambda load: events.append(("load", str(load.source.name)))),
        (tirx.Bind, lambda b: lets.append((b.var, b.value))),
    ])  # fmt: skip
    buffers = {}
    for name in scalars - unordered:
        sets = stores.get(name, [])
        if sets and _set_before_read(name, sets, events):
            buffers[name] = _folded(sets)
    return lets, buffers


def _loads_of(name: str, expr: Any) -> int:
    found: list[str] = []
    tvm_ffi.structural_walk(expr, (ir.TensorLoad, lambda n: found.append(str(n.source.name))))
    return found.count(name)


def _set_before_read(name: str, sets: list[Any], events: list[tuple[str, str]]) -> bool:
    """Whether nothing reads scalar ``name`` before its last store, other than the stores' own values."""
    mine = [kind for kind, buffer in events if buffer == name]
    last = len(mine) - 1 - mine[::-1].index("store")
    own = sum(_loads_of(name, st.value) for st in sets)
    return mine[:last].count("load") == own


def _folded(sets: list[Any]) -> Any:
    """The value the last of ``sets`` (stores to one scalar, in order) leaves in it."""
    value = sets[0].value
    for store in sets[1:]:
        before = value

        def on_load(load: Any, name: str = str(store.buffer.name), before: Any = before) -> Any:
            return before if str(load.source.name) == name else load

        value = tvm_ffi.structural_map(store.value, (ir.TensorLoad, on_load))
    return value


def _reads_memory(expr: Any) -> bool:
    loads: list[Any] = []
    tvm_ffi.structural_walk(expr, (ir.TensorLoad, loads.append))
    return bool(loads)


def with_block_scalars(node: Any, body: Any) -> Any | None:
    """``node`` with the block scalars it reads (see ``_block_scalars``) replaced by their values.

    ``None`` when it reads one it cannot replace: a value that loads memory (it could
    differ by thread, or by when the producer runs) or a scalar set in a loop, under a
    condition, or after something read it.
    """
    lets, buffers = _block_scalars(body)
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



def warp_specialize_requested(target: Target) -> bool:
    """Whether the pipeline for ``target`` gets the warp-specialization passes (what the kernel
    cache entry records, since the env var is not in its key)."""
    from .hopper import wgmma_available
    from .tma import warp_specialize_enabled

    return bool(wgmma_available(target)) and warp_specialize_enabled(target)



__all__ = [
    "MBAR",
    "NUM_REGISTERS",
    "PRODUCER_THREADS",
    "TMA_ONCE",
    "TMA_STORE",
    "TMA_TILE",
    "WS_ATTR",
    "WS_LOOP",
    "WS_ONCE",
    "WS_PRODUCER",
    "WS_STAGES",
    "mbarrier_address",
    "warp_specialize_requested",
    "with_block_scalars",
]
