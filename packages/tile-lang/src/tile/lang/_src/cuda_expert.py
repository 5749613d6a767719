"""Hand-written synchronisation for NVIDIA GPUs (expert tier): mbarriers, warp votes and
shuffles, register reallocation, and hand-written warp specialization (``T.ws``).

These are thread-level: a kernel using them says which threads do what, so it runs on
CUDA targets (and the CUDA emulator) only; the CPU backend rejects the calls. mbarriers
need sm_80 (their transaction counts, ``T.mbarrier_expect_tx``, and ``T.fence_proxy_async``
sm_90; ``T.set_max_nreg`` sm_90a): the CUDA backend names the call and its line on an arch
without it. The helpers are those of the CUDA backend's device header (``tile_mbarrier_*``),
the warp intrinsics are CUDA's own (``__shfl_sync``, ...).

Example (a producer warpgroup fills shared memory, a consumer waits for it)::

    bar = T.alloc_barrier(128)          # arrival count: the producer's 128 threads
    with T.ws(1):                       # warpgroup 1: producer
        ...store to S...
        T.barrier_arrive(bar)
    with T.ws(0):                       # warpgroup 0: consumer
        T.barrier_wait(bar, 0)          # phase 0 completes when all 128 arrived
        ...read S...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.annotations import MIN_BLOCKS_PER_SM

from ..errors import ArgumentTypeError, TileScopeError, TileTypeError
from .builtins import _alloc, _kernel
from .naming import named
from .session import current_session, in_kernel_session, record_thread_atomic, record_thread_level_call

WARP = 32
WARPGROUP = 128
FULL_MASK = 0xFFFFFFFF


def _tx() -> Any:
    kernel = _kernel("a thread-level T.* call")
    if not kernel.thread_vars:
        raise TileScopeError("the kernel has no thread index", hint="give T.Kernel threads=...")
    return kernel.thread_vars[0]


def _void(name: str, *args: Any) -> None:
    record_thread_level_call("a thread-level T.* call")
    B.evaluate(tirx.call_extern("void", name, *args))


def _barrier_address(barrier: Any) -> Any:
    """``&barrier[i]`` for ``bars[i]``, ``&barrier[0]`` for a whole barrier buffer."""
    if tirx.is_buffer_var(barrier):
        return tirx.address_of(barrier[0])
    if isinstance(barrier, TensorLoad):
        return tirx.address_of(barrier)
    raise TileTypeError(
        f"expected a barrier from T.alloc_barrier, got {type(barrier).__name__}",
        hint="pass the barrier (bar) or one of a list of barriers (bars[i])",
    )


def alloc_barrier(arrive_count: int | Sequence[int]) -> Any:
    """mbarriers in shared memory, one per arrival count, initialised by thread 0 before
    any thread goes on (``T.alloc_barrier(128)`` or ``T.alloc_barrier([128, 128])``)."""
    counts = [arrive_count] if isinstance(arrive_count, int | ir.Expr) else list(arrive_count)
    if not counts:
        raise TileTypeError("T.alloc_barrier needs at least one arrival count", hint="T.alloc_barrier(128)")
    bars = _alloc("T.alloc_barrier", [len(counts)], "uint64", "shared")
    with B.If(_tx() == 0), B.Then():
        for index, count in enumerate(counts):
            _void("tile_mbarrier_init", tirx.address_of(bars[index]), count)
        _void("tile_fence_barrier_init")
    B.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
    return bars


def barrier_arrive(barrier: Any) -> None:
    """This thread arrives at ``barrier`` (its phase completes when the count is reached)."""
    _void("tile_mbarrier_arrive", _barrier_address(barrier))


def barrier_wait(barrier: Any, parity: Any = 0) -> None:
    """Wait until the phase of ``barrier`` with this parity (0, 1, 0, ...) has completed."""
    _void("tile_mbarrier_wait", _barrier_address(barrier), parity)


def mbarrier_arrive(mbarrier: Any) -> None:
    """``T.barrier_arrive`` under TileLang's mbarrier name (``T.mbarrier_arrive(mbarrier=bar[i])``)."""
    barrier_arrive(mbarrier)


def mbarrier_wait_parity(mbarrier: Any, parity: Any) -> None:
    """``T.barrier_wait`` under TileLang's mbarrier name and keywords (``mbarrier=``, ``parity=``)."""
    barrier_wait(mbarrier, parity)


def mbarrier_arrive_expect_tx(barrier: Any, tx_bytes: Any) -> None:
    """Arrive at ``barrier`` and add ``tx_bytes`` of asynchronous copies it waits for."""
    _void("tile_mbarrier_arrive_expect_tx", _barrier_address(barrier), tx_bytes)


def mbarrier_expect_tx(barrier: Any, tx_bytes: Any) -> None:
    """Add ``tx_bytes`` of asynchronous copies to the current phase of ``barrier`` without
    arriving: the phase completes once its arrivals are in and those bytes have landed."""
    _void("tile_mbarrier_expect_tx", _barrier_address(barrier), tx_bytes)


def fence_proxy_async() -> None:
    """Order this thread's shared-memory writes before later asynchronous-proxy reads (TMA, wgmma)."""
    _void("tile_fence_proxy_async")


def set_max_nreg(reg_count: int, is_inc: int) -> None:
    """Raise (``is_inc=1``) or lower (``0``) this warpgroup's register budget (``setmaxnreg``, sm_90a)."""
    if not isinstance(reg_count, int) or reg_count % 8 or not 24 <= reg_count <= 256:
        raise TileTypeError(
            f"T.set_max_nreg({reg_count!r}, ...): the count must be a multiple of 8 in [24, 256]",
            hint="write e.g. T.set_max_nreg(240, 1) for consumers and T.set_max_nreg(24, 0) for producers",
        )
    _void(f"tile_setmaxnreg_{'inc' if is_inc else 'dec'}<{reg_count}>")


def no_set_max_nreg() -> None:
    """Keep the kernel's register budget (tile inserts no reallocation into hand-written kernels)."""


def disable_warp_group_reg_alloc() -> None:
    """Same as ``no_set_max_nreg``: no register reallocation between warpgroups."""


class ws:  # TileLang's lower-case name: ``with T.ws(0, 1):``
    """``with T.ws(*groups):`` the body runs on the listed warpgroups (128 threads each) only."""

    def __init__(self, *groups: int) -> None:
        if not groups:
            raise TileTypeError("T.ws needs at least one warpgroup index", hint="with T.ws(0): ...")
        self.groups = groups
        self._frames: list[Any] = []

    def __enter__(self) -> None:
        group = tirx.floordiv(_tx(), WARPGROUP)
        cond = group == self.groups[0]
        for other in self.groups[1:]:
            cond = tirx.Or(cond, group == other)
        self._frames = [B.If(cond), B.Then()]
        for frame in self._frames:
            frame.__enter__()

    def __exit__(self, *exc: Any) -> None:
        for frame in reversed(self._frames):
            frame.__exit__(*exc)


def get_lane_idx() -> Any:
    """This thread's lane in its warp (0-31)."""
    return tirx.floormod(_tx(), WARP)


def get_warp_idx() -> Any:
    """This thread's warp in the block."""
    return tirx.floordiv(_tx(), WARP)


get_warp_idx_sync = get_warp_idx


def get_warp_group_idx() -> Any:
    """This thread's warpgroup (128 threads) in the block."""
    return tirx.floordiv(_tx(), WARPGROUP)


def sync_warp(mask: Any = FULL_MASK) -> None:
    """Wait for the warp's threads in ``mask`` (``__syncwarp``)."""
    _void("__syncwarp", tirx.const(mask, "uint32"))


def _lane_value(value: Any) -> Any:
    """A warp collective's operand as an expression: a Python int is an int32, a float a float32
    (``T.match_all_sync(7)``, TileLang's warp_vote tests)."""
    if isinstance(value, bool):
        return tirx.const(int(value), "int32")
    if isinstance(value, int):
        return tirx.const(value, "int32")
    if isinstance(value, float):
        return tirx.const(value, "float32")
    return value


def shfl_sync(value: Any, src_lane: Any, mask: Any = FULL_MASK) -> Any:
    """``value`` as lane ``src_lane`` of the warp holds it (``__shfl_sync``)."""
    value = _lane_value(value)
    return tirx.call_extern(str(value.ty), "__shfl_sync", tirx.const(mask, "uint32"), value, src_lane)


def activemask() -> Any:
    """The mask of the warp's active lanes (``__activemask``)."""
    return tirx.call_extern("uint32", "__activemask")


def _predicate(name: str, predicate: Any) -> Any:
    """A vote's predicate as an expression: Python bools and ints become constants; a
    floating-point value is an ``ArgumentTypeError`` (also a ``TypeError``), as in CUDA,
    whose votes take an ``int``."""
    if isinstance(predicate, bool):
        return tirx.const(predicate, "bool")
    if isinstance(predicate, int):
        return tirx.const(predicate, "int32")
    dt = str(predicate.ty) if isinstance(predicate, ir.Expr) else type(predicate).__name__
    if not dt.startswith(("int", "uint", "bool")):
        raise ArgumentTypeError(
            f"T.{name} requires an integer or boolean predicate, got {dt}",
            hint=f"compare first: T.{name}(x != 0)",
        )
    return predicate


def ballot_sync(predicate: Any, mask: Any = FULL_MASK) -> Any:
    """Bit i set where lane i's ``predicate`` holds (``__ballot_sync``), zero-extended to
    ``uint64`` as TileLang returns it (a 32-lane warp sets the low 32 bits only)."""
    predicate = _predicate("ballot_sync", predicate)
    return tirx.call_extern("uint64", "__ballot_sync", tirx.const(mask, "uint32"), predicate)


def any_sync(predicate: Any, mask: Any = FULL_MASK) -> Any:
    """Whether ``predicate`` holds in any lane (``__any_sync``)."""
    predicate = _predicate("any_sync", predicate)
    return tirx.call_extern("int32", "__any_sync", tirx.const(mask, "uint32"), predicate)


def all_sync(predicate: Any, mask: Any = FULL_MASK) -> Any:
    """Whether ``predicate`` holds in every lane (``__all_sync``)."""
    predicate = _predicate("all_sync", predicate)
    return tirx.call_extern("int32", "__all_sync", tirx.const(mask, "uint32"), predicate)


CP_ASYNC_BYTES = (4, 8, 16)


def _pointee_bytes(pointer: Any) -> int:
    """Bytes of the element ``pointer`` (``T.access_ptr(A[i])``, ``&A[i]``) points at."""
    if isinstance(pointer, tirx.Call) and pointer.op.name == "tirx.address_of" and pointer.args:
        dtype = tvm_ffi.dtype(str(pointer.args[0].dtype))
        return int(dtype.bits) * int(dtype.lanes) // 8
    raise TileTypeError(
        f"T.ptx_cp_async copies between element addresses, got {type(pointer).__name__}",
        hint='pass T.access_ptr(S[i, j], "w") and T.access_ptr(A[i, j], "r")',
    )


def ptx_cp_async(dst: Any, src: Any, num_elems: Any, predicate: Any = None) -> None:
    """Start copying ``num_elems`` elements of ``dst``'s type (4, 8 or 16 bytes in all) from
    global ``src`` to shared ``dst`` asynchronously (``cp.async``, sm_80); pointers from
    ``T.access_ptr``. With ``predicate``, a false predicate writes zeros instead (the copy reads
    nothing). Complete with ``T.ptx_commit_group()`` and ``T.ptx_wait_group(n)``, or with
    ``T.cp_async_barrier_noinc(bar)``.

    ``T.ptx_cp_async(T.access_ptr(S[8 * tx], "w"), T.access_ptr(A[8 * tx], "r"), 8)`` copies
    eight float16 elements: 16 bytes."""
    count = num_elems.value if isinstance(num_elems, tirx.IntImm) else num_elems
    if not isinstance(count, int) or isinstance(count, bool):
        raise TileTypeError(
            f"T.ptx_cp_async needs a constant element count, got {num_elems!r}",
            hint="copy 4, 8 or 16 bytes: e.g. 8 float16 elements",
        )
    num_bytes = count * _pointee_bytes(dst)
    if num_bytes not in CP_ASYNC_BYTES:
        raise TileTypeError(
            f"T.ptx_cp_async copies 4, 8 or 16 bytes; {count} elements of {_pointee_bytes(dst)} bytes"
            f" are {num_bytes}",
            hint="split larger copies into 16-byte pieces (8 float16 or 4 float32 elements)",
        )
    if predicate is None:
        _void(f"tile_cp_async_{num_bytes}", dst, src)
        return
    taken = _predicate("ptx_cp_async", predicate)
    if str(taken.ty) != "bool":
        taken = tirx.NE(taken, tirx.const(0, str(taken.ty)))
    guard = tirx.Select(taken, tirx.const(num_bytes, "int32"), tirx.const(0, "int32"))
    _void(f"tile_cp_async_zfill_{num_bytes}", dst, src, guard)


def ptx_commit_group() -> None:
    """Close the group of ``cp.async`` copies started since the last commit."""
    _void("tile_cp_async_commit")


def ptx_wait_group(pending: int = 0) -> None:
    """Wait until at most ``pending`` committed groups of ``cp.async`` copies are in flight."""
    if not isinstance(pending, int) or pending < 0:
        raise TileTypeError(
            f"T.ptx_wait_group needs a constant count >= 0, got {pending!r}",
            hint="write T.ptx_wait_group(0) to wait for every committed copy",
        )
    _void(f"tile_cp_async_wait<{pending}>")


def shuffle_elect(thread_extent: int = 0) -> Any:
    """True for exactly one thread in each group of ``thread_extent`` threads (0: the block);
    the first thread of each group is the one elected."""
    tx = _tx()
    return tirx.EQ(tx if thread_extent == 0 else tirx.floormod(tx, thread_extent), 0)


def annotate_min_blocks_per_sm(count: int) -> None:
    """Occupancy hint: the compiler keeps the kernel's registers few enough for ``count`` blocks
    per SM (the second argument of CUDA's ``__launch_bounds__``); ignored where no such bound
    exists (the CPU)."""
    _kernel("T.annotate_min_blocks_per_sm")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ArgumentTypeError(
            f"T.annotate_min_blocks_per_sm takes a positive int, got {count!r}",
            hint="write T.annotate_min_blocks_per_sm(2)",
        )
    current_session("T.annotate_min_blocks_per_sm").body_rewrites.append(
        lambda body: _inside_thread_launch(body, MIN_BLOCKS_PER_SM, count)
    )


def _inside_thread_launch(body: Any, key: str, value: int) -> Any:
    """``body`` with ``AttrStmt(key, value)`` around what runs inside each ``threadIdx.x`` launch."""

    def on_attr(node: Any) -> Any:
        launches_x = (
            str(node.attr_key) == "thread_extent"
            and isinstance(node.node, tirx.IterVar)
            and str(node.node.thread_tag) == "threadIdx.x"
        )
        if not launches_x:
            return node
        inner = tirx.AttrStmt(ir.StringImm(key), key, tirx.const(value, "int32"), node.body)
        return tirx.AttrStmt(node.node, node.attr_key, node.value, inner)

    return tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr))


def annotate_producer_reg_dealloc(reg_count: int = 24) -> None:
    """Register-reallocation hint for producer warpgroups; use ``T.set_max_nreg`` to act."""


def annotate_consumer_reg_alloc(reg_count: int = 240) -> None:
    """Register-reallocation hint for consumer warpgroups; use ``T.set_max_nreg`` to act."""


def annotate_l2_hit_ratio(*_args: Any, **_kwargs: Any) -> None:
    """L2 persistence hint; tile launches without access-policy windows."""


def _scratch(dtype: str, init: Any) -> Any:
    """A per-thread scalar (a local of one element) holding ``init``; its ``[0]`` reads it."""
    cell = _alloc("a warp collective", [1], dtype, "local")
    B.buffer_store(cell, init, [0])
    return cell


def _warp_reducer(name: str, combine: Any) -> Any:
    def reduce(value: Any) -> Any:
        value = _lane_value(value)
        dtype = str(value.ty)
        acc = _scratch(dtype, value)
        for offset in (16, 8, 4, 2, 1):  # butterfly: after the last step every lane holds the result
            other = tirx.call_extern(
                dtype, "__shfl_xor_sync", tirx.const(FULL_MASK, "uint32"), acc[0], offset
            )
            B.buffer_store(acc, combine(acc[0], other), [0])
        return acc[0]

    return named(
        reduce,
        name,
        f"The {name.removeprefix('warp_reduce_')} of ``value`` over the warp's 32 lanes, in every lane.",
    )


warp_reduce_sum = _warp_reducer("warp_reduce_sum", lambda a, b: a + b)
warp_reduce_max = _warp_reducer("warp_reduce_max", tirx.max)
warp_reduce_min = _warp_reducer("warp_reduce_min", tirx.min)
warp_reduce_bitand = _warp_reducer("warp_reduce_bitand", tirx.bitwise_and)
warp_reduce_bitor = _warp_reducer("warp_reduce_bitor", tirx.bitwise_or)


def ballot(predicate: Any) -> Any:
    """``ballot_sync`` over the full warp, widened to ``uint64`` as TileLang returns it."""
    predicate = _predicate("ballot", predicate)
    return tirx.call_extern("uint64", "__ballot_sync", tirx.const(FULL_MASK, "uint32"), predicate)


def match_any_sync(value: Any, mask: Any = FULL_MASK) -> Any:
    """The lanes of ``mask`` whose ``value`` equals this lane's (as ``__match_any_sync``):
    each lane compares its value with every lane's, read by shuffles."""
    value = _lane_value(value)
    found = _scratch("uint32", tirx.const(0, "uint32"))
    for lane in range(WARP):
        other = shfl_sync(value, lane, mask)
        bit = tirx.const((1 << lane) & mask, "uint32")
        B.buffer_store(
            found,
            tirx.bitwise_or(found[0], _script.if_then_else(other == value, bit, tirx.const(0, "uint32"))),
            [0],
        )
    return found[0]


def match_all_sync(value: Any, mask: Any = FULL_MASK) -> Any:
    """``mask`` if every lane of ``mask`` holds the same ``value``, else 0 (``__match_all_sync``)."""
    same = match_any_sync(value, mask)
    return _script.if_then_else(
        same == tirx.const(mask, "uint32"), tirx.const(mask, "uint32"), tirx.const(0, "uint32")
    )


def find_first_set(value: Any) -> Any:
    """``T.__ffs(x)``: the 1-based position of the lowest set bit of ``x``, 0 when none
    (CUDA's ``__ffs``; ``__ffsll`` for 64-bit values)."""
    dt = str(value.ty) if isinstance(value, ir.Expr) else "int32"
    if not dt.startswith(("int", "uint")):
        raise ArgumentTypeError(f"T.__ffs takes an integer, got {dt}", hint="T.__ffs(T.ballot_sync(p))")
    if _bits(dt) == 64:
        return tirx.call_extern("int32", "__ffsll", tirx.Cast("int64", value))
    return tirx.call_extern("int32", "__ffs", tirx.Cast("int32", value))


def find_nth_set(mask: Any, base: Any, offset: Any) -> Any:
    """``T.__fns(mask, base, offset)``: the position of the ``offset``-th set bit of the 32-bit
    ``mask`` counted from bit ``base`` (towards the top for offset > 0, towards bit 0 for
    offset < 0; offset 0 asks whether bit ``base`` is set), ``0xffffffff`` when there is
    none (CUDA's ``__fns``)."""
    return tirx.call_extern(
        "uint32",
        "__fns",
        tirx.Cast("uint32", mask),
        tirx.Cast("uint32", base),
        tirx.Cast("int32", offset),
    )


def _bits(dt: str) -> int:
    return int(tvm_ffi.dtype(dt).bits)


def _block_vote(name: str, finish: Any) -> Any:
    def vote(predicate: Any) -> Any:
        """A block barrier that also counts the threads whose predicate holds (shared counter).
        Outside a kernel (IR built by hand) it is CUDA's ``__<name>(predicate)`` call."""
        predicate = _predicate(name, predicate)
        if not in_kernel_session():
            return tirx.call_extern("int32", f"__{name}", predicate)
        counter = _alloc(f"T.{name}", [1], "int32", "shared")
        with B.If(_tx() == 0), B.Then():
            B.buffer_store(counter, tirx.const(0, "int32"), [0])
        _sync()
        with B.If(tirx.NE(tirx.Cast("int32", predicate), 0)), B.Then():
            _void("atomicAdd", tirx.address_of(counter[0]), tirx.const(1, "int32"))
        _sync()
        result = _scratch("int32", finish(counter[0], _kernel(f"T.{name}")))
        _sync()  # the counter may be reused by the next vote
        return result[0]

    vote.__name__ = vote.__qualname__ = name
    return vote


def _sync() -> None:
    B.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def _block_threads(kernel: Any) -> Any:
    total: Any = 1
    for extent in kernel.threads:
        total = total * extent
    return total


syncthreads_count = _block_vote("syncthreads_count", lambda count, _k: count)
syncthreads_count.__doc__ = (
    "A block barrier returning how many threads' ``predicate`` holds (``__syncthreads_count``)."
)
syncthreads_or = _block_vote("syncthreads_or", lambda count, _k: tirx.Cast("int32", count > 0))
syncthreads_or.__doc__ = (
    "A block barrier returning 1 if any thread's ``predicate`` holds (``__syncthreads_or``)."
)
syncthreads_and = _block_vote(
    "syncthreads_and", lambda count, k: tirx.Cast("int32", count == _block_threads(k))
)
syncthreads_and.__doc__ = (
    "A block barrier returning 1 if every thread's ``predicate`` holds (``__syncthreads_and``)."
)


def warpgroup_arrive() -> None:
    """Order earlier register and shared-memory writes before the next wgmma (``wgmma.fence``)."""
    _void("tile_wgmma_fence")


def warpgroup_commit_batch() -> None:
    """Close the batch of wgmma issued since the last commit (``wgmma.commit_group``)."""
    _void("tile_wgmma_commit")


def warpgroup_wait(num_mma: int) -> None:
    """Wait until at most ``num_mma`` committed wgmma batches are in flight (``wgmma.wait_group``)."""
    if not isinstance(num_mma, int) or num_mma < 0:
        raise TileTypeError(
            f"T.warpgroup_wait needs a constant count >= 0, got {num_mma!r}",
            hint="write T.warpgroup_wait(0) to wait for every committed batch",
        )
    _void(f"tile_wgmma_wait<{num_mma}>")


def wait_wgmma(id: int) -> None:
    """Same as ``T.warpgroup_wait(id)``: tile's ``T.gemm`` waits for its own wgmma, so this
    only waits for batches a hand-written kernel committed."""
    warpgroup_wait(id)


def warpgroup_fence_operand(buffer: Any, offset: Any = 0, num_regs: Any = None, dtype: Any = None) -> None:
    """Keep the compiler from moving accesses of ``buffer``'s registers across in-flight wgmma."""
    count = num_regs if num_regs is not None else _count_of(buffer)
    if str(buffer.dtype) != "float32":
        return  # only float32 accumulators are wgmma outputs tile tracks; others need no fence
    _void(
        "tile_wgmma_fence_operand",
        tirx.address_of(buffer[offset]) if offset else tirx.address_of(buffer[0]),
        count,
    )


def _count_of(buffer: Any) -> Any:
    total: Any = 1
    for extent in buffer.shape:
        total = total * extent
    return total


def cp_async_barrier_noinc(barrier: Any) -> None:
    """Make ``barrier``'s phase wait for this thread's earlier ``cp.async`` copies, committed
    to a group or not (PTX ``cp.async.mbarrier.arrive.noinc``): tile waits for all of them
    (``cp.async.wait_all``), then arrives (the arrival counts against the barrier's expected
    count). A plain wait_group would leave copies no ``T.ptx_commit_group`` closed in flight."""
    _void("tile_cp_async_wait_all")
    barrier_arrive(barrier)


def ptx_init_barrier_thread_count(barrier: Any, thread_count: Any) -> None:
    """Initialise the mbarrier ``barrier`` to expect ``thread_count`` arrivals per phase."""
    _void("tile_mbarrier_init", _barrier_address(barrier), thread_count)


def ptx_fence_barrier_init() -> None:
    """Make mbarrier initialisations visible before the barriers are used."""
    _void("tile_fence_barrier_init")


ptx_arrive_barrier = barrier_arrive


def tma_store_arrive() -> None:
    """Commit this thread's bulk stores. tile's copies to global memory complete before the
    next statement, so there is nothing in flight to commit."""


def tma_store_wait(count: int = 0, read: bool = True) -> None:
    """Wait for committed bulk stores; tile's copies to global memory have already completed."""


def _thread_atomic(name: str, extern: str) -> Any:
    def update(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False) -> Any:
        if not isinstance(dst, TensorLoad):
            raise TileTypeError(
                f"T.{name} takes one element, got {type(dst).__name__}", hint=f"T.{name}(A[i], v)"
            )
        record_thread_atomic(f"T.{name}")
        old = tirx.call_extern(str(dst.ty), extern, tirx.address_of(dst), tirx.Cast(str(dst.ty), value))
        if return_prev:
            return old
        B.evaluate(old)
        return None

    return named(
        update,
        name,
        (
            f"This thread's atomic ``dst {name.removeprefix('atomic_')}= value`` on an integer element "
            f"(``{extern}``); with ``return_prev=True`` the old value. Every backend."
        ),
    )


atomic_or = _thread_atomic("atomic_or", "atomicOr")
atomic_and = _thread_atomic("atomic_and", "atomicAnd")
atomic_xor = _thread_atomic("atomic_xor", "atomicXor")


def named_barrier_arrive(barrier_id: Any, thread_count: Any) -> None:
    """The calling threads arrive at named barrier ``barrier_id`` (1-15) and go on without
    waiting (``bar.arrive``); the waiting side calls ``T.sync_threads(barrier_id, thread_count)``."""
    _void("tile_named_barrier_arrive", barrier_id, thread_count)
