"""SIMT lowering rules for copy, fill, reduce, cumsum and atomics, for any GPU target.

Each rule starts from the generic loops tile-ir gives every backend and decides how
the block's threads share them. Everything target-specific is read from the
capabilities (warp size) or is a call into the vendor's device header under a
``tile::`` name (``tile::shfl_xor``, ``tile::shfl_idx``), which ``tile_cuda.h`` and
``tile_hip.h`` both implement; so CUDA (warp32) and ROCm (wave64) register the same
rules (:func:`register_simt_lowerings`), a vendor adding its own special cases around them.

* A nest that touches a fragment runs on the threads that own its elements: the
  nest carries the fragment (``tile.loop_fragment``) that ``bind_parallel_loops``
  binds, and ``lower_fragments`` turns the accesses into per-thread registers.
* A copy between global and shared memory is cooperative and vectorized: thread
  ``t`` moves ``V`` consecutive elements (``V * bits = 128`` where the tile's
  alignment allows, fewer otherwise) per step (``LDG.E.128`` on NVIDIA).
* A reduction of a fragment combines each thread's elements in registers, then
  across the lanes that share a row with ``tile::shfl_xor``, then across warps through
  a shared-memory workspace.
* Atomics on memory other threads or blocks can see become ``tile::atomic_*`` calls
  (pass ``lower_gpu_atomics``, :mod:`tile.ir.gpu.atomics`); they are never vectorized.

Barriers between shared-memory producers and consumers are placed by TVM's
``ThreadSync`` pass during code generation.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

from tile.layout import Fragment, dtype_bits

from ..annotations import LOOP_FRAGMENT, PARALLEL_LOOP
from ..errors import UnsupportedOnTargetError
from ..ops import Atomic, Copy, Cumsum, Fill, LowerContext, Reduce, TileOp, register_lowering
from ..ops.atomic import lower_atomic_update
from ..ops.copy import lower_copy_loops
from ..ops.fill import lower_fill_loops
from ..ops.layout_rules import (
    encode_layout,
    fragment_through,
    int_shape,
    is_fragment_buffer,
    is_thread_private,
    region_is_whole,
)
from ..ops.loops import bind_ranges, cast_to, fresh_vars, parallel_nest, serial_nest
from ..ops.reduce import lower_reduce_loops, reduce_combine, reduce_identity, reduce_start
from ..ops.region import Region, as_int
from ..ops.registry import LoweringRule
from ..transform._layout_items import squeezed_fragment
from ..transform.lower_fragments import fragment_coords, fragment_replica_coords
from .statements import shared_barrier

VECTOR_BITS = 128


# --------------------------------------------------------------------------- helpers
def _outer_parallel(stmt: Any) -> Any | None:
    found: list[Any] = []

    def visit(node: Any) -> Any:
        notes = node.annotations
        if notes is not None and PARALLEL_LOOP in [str(k) for k in notes]:
            found.append(node)
            return tvm_ffi.VisitInterrupt(True)
        return None

    tvm_ffi.structural_walk(stmt, (tirx.For, visit), order="pre")
    return found[0] if found else None


def with_loop_fragment(stmt: Any, frag: Fragment) -> Any:
    """``stmt`` with its outermost ``T.Parallel`` loop bound by ``frag``."""
    target = _outer_parallel(stmt)
    if target is None:
        return stmt

    def on_for(loop: Any) -> Any:
        if not loop.same_as(target):
            return loop
        notes = {str(k): v for k, v in loop.annotations.items()}
        notes[LOOP_FRAGMENT] = encode_layout(frag)
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, None, notes)

    return tvm_ffi.structural_map(stmt, (tirx.For, on_for))


def _fragment_of(region: Region, ctx: LowerContext) -> Fragment | None:
    """The fragment of a whole-buffer fragment operand (``None`` for anything else)."""
    if not is_fragment_buffer(region.buffer) or not region_is_whole(region):
        return None
    frag = ctx.layouts.get(region.name)
    return frag if isinstance(frag, Fragment) else None


def _nest_fragment(region: Region, ctx: LowerContext) -> Fragment | None:
    """The loop fragment of a nest over ``region``'s dense dims that follows its fragment."""
    frag = _fragment_of(region, ctx)
    shape = int_shape(list(region.buffer.shape))
    if frag is None or shape is None:
        return None
    units = [k for k, d in enumerate(shape) if d == 1]
    if units:  # the nest runs over the dense dims (a (1, N) fragment: over N)
        if len(units) == len(shape):
            return None
        frag = squeezed_fragment(frag, shape, units)
        shape = [d for d in shape if d != 1]
    return fragment_through(frag, shape, list(range(len(shape))))


def vector_fragment(extents: list[int], threads: int, lanes: int) -> Fragment:
    """Row-major tile, thread ``t`` owning runs of ``lanes`` consecutive elements.

    Element ``e`` (flattened) goes to thread ``(e // lanes) % threads`` at local
    ``(e // (lanes * threads), e % lanes)``: the inner local dim is one vector.
    """

    def fn(*v: Any) -> tuple[Any, Any]:
        e: Any = tirx.const(0, "int32")
        for var, extent in zip(v, extents, strict=True):
            e = e * extent + var
        chunk = tirx.floordiv(e, lanes)
        return tirx.floormod(chunk, threads), [tirx.floordiv(chunk, threads), tirx.floormod(e, lanes)]

    return Fragment(list(extents), forward_fn=fn)


def _vector_lanes(op: Copy, ctx: LowerContext, extents: list[int]) -> int:
    """The widest vector (elements) every access of the copy can use, aligned."""
    bits = max(dtype_bits(op.src.dtype), dtype_bits(op.dst.dtype))
    lanes = max(VECTOR_BITS // bits, 1)
    threads = ctx.threads or 1
    while lanes > 1:
        ok = extents[-1] % lanes == 0 and math.prod(extents) % (lanes * threads) == 0
        for region in (op.src, op.dst):
            row = region.buffer.shape[-1]
            ok = ok and ctx.analyzer.can_prove(tirx.floormod(row, lanes) == 0)
            ok = ok and ctx.analyzer.can_prove(tirx.floormod(region.mins[-1], lanes) == 0)
            ok = ok and as_int(region.extents[-1]) not in (None, 1)
        if ok:
            return lanes
        lanes //= 2
    return 1


# --------------------------------------------------------------------------- copy / fill
def held_in_place(src: Fragment, dst: Fragment) -> bool:
    """Whether every thread that holds an element of ``dst`` also holds it in ``src``.

    Then a copy ``dst = src`` is register to register on each thread. Fragments of one
    shape over different warp partitions (FlashAttention's score tile from a 2 x 2
    warp split, copied into the A operand of a gemm whose warps each need whole rows)
    are not: the element a thread needs sits in another thread's registers.
    """
    if src.is_equal(dst):
        return True
    holders: dict[tuple[int, ...], set[int]] = {}
    for coord, _rep, thread, _local in src.enumerate_threads():
        holders.setdefault(coord, set()).add(thread)
    return all(thread in holders.get(coord, ()) for coord, _rep, thread, _local in dst.enumerate_threads())


def _copy_through_shared(op: Copy, src: Fragment, dst: Fragment, ctx: LowerContext) -> Any:
    """``dst = src`` between fragments that place elements on different threads.

    The source's owners store the tile (already cast to the destination type) into a
    shared scratch tile, and after a barrier the destination's owners load their
    elements; the closing barrier lets the next writer of the scratch tile go ahead.
    """
    shape = [int(e) for e in src.get_input_shape()]
    scratch = tirx.decl_buffer(shape, op.dst.dtype, name=f"{op.dst.name}_xchg", scope="shared")
    extents = [tirx.const(n, "int32") for n in shape]
    put_vars, get_vars = fresh_vars("i", len(shape)), fresh_vars("j", len(shape))
    bind_ranges(ctx.analyzer, put_vars, extents)
    bind_ranges(ctx.analyzer, get_vars, extents)
    value = cast_to(op.dst.dtype, tirx.BufferLoad(op.src.buffer, list(put_vars)))
    put = parallel_nest(put_vars, extents, tirx.BufferStore(scratch, value, list(put_vars)))
    load = tirx.BufferLoad(scratch, list(get_vars))
    get = parallel_nest(get_vars, extents, tirx.BufferStore(op.dst.buffer, load, list(get_vars)))
    put = with_loop_fragment(put, fragment_through(src, shape, list(range(len(shape)))))
    get = with_loop_fragment(get, fragment_through(dst, shape, list(range(len(shape)))))
    sync = shared_barrier
    return tirx.SeqStmt([tirx.AllocBuffer(scratch), sync(), put, sync(), get, sync()])


def lower_copy_simt(op: TileOp, ctx: LowerContext) -> Any:
    """Fragment copies follow the fragment; memory-to-memory copies are vectorized.

    A copy between two fragments that put an element on different threads goes through
    shared memory (:func:`_copy_through_shared`).
    """
    assert isinstance(op, Copy)
    src_frag, dst_frag = _fragment_of(op.src, ctx), _fragment_of(op.dst, ctx)
    if src_frag is not None and dst_frag is not None and not held_in_place(src_frag, dst_frag):
        return _copy_through_shared(op, src_frag, dst_frag, ctx)
    loops = lower_copy_loops(op, ctx)
    if is_thread_private(op.src.buffer) and _fragment_of(op.dst, ctx) is None:
        # out of a thread's own buffer: each thread copies all of it, as TileLang does (the
        # region it writes is the thread's to choose: A[row, t * 32 : (t + 1) * 32])
        return serial_nest(loops)
    for region in (op.dst, op.src):
        frag = _nest_fragment(region, ctx)
        if frag is not None:
            return with_loop_fragment(loops, frag)
    extents = int_shape(op.src.dense_extents())
    if extents is None or not extents or ctx.threads is None:
        return loops
    lanes = _vector_lanes(op, ctx, extents)
    if lanes == 1:
        return loops
    return with_loop_fragment(loops, vector_fragment(extents, ctx.threads, lanes))


def lower_fill_simt(op: TileOp, ctx: LowerContext) -> Any:
    """A fragment is filled by its owners; a replicated one by every thread holding a copy.

    A whole replicated fragment: each thread stores its own locals, whichever replica it
    holds. Without a thread variable every thread stores every element (all get the same
    value, so a thread storing an element it does not own only writes that value into a
    slot it uses for another).
    """
    assert isinstance(op, Fill)
    frag = _fragment_of(op.dst, ctx)  # whole-buffer fragments only
    if frag is not None and frag.replicate_size > 1:
        if ctx.thread_var is not None:
            local = tirx.Var("l", "int32")
            coords, _replica, valid = fragment_replica_coords(frag, ctx.thread_var, local)
            store: Any = tirx.BufferStore(op.dst.buffer, op.value, [ctx.analyzer.simplify(c) for c in coords])
            if not ctx.analyzer.can_prove(valid):
                store = tirx.IfThenElse(valid, store, None)
            return tirx.For(local, 0, frag.locals_per_thread(), tirx.ForKind.UNROLLED, store)
        shape = int_shape(list(op.dst.buffer.shape)) or []
        if math.prod(shape) <= 1024:
            stores = [
                tirx.BufferStore(op.dst.buffer, op.value, [tirx.const(i, "int32") for i in point])
                for point in itertools.product(*[range(n) for n in shape])
            ]
            return tirx.SeqStmt(stores) if len(stores) > 1 else stores[0]
    loops = lower_fill_loops(op, ctx)
    nest = _nest_fragment(op.dst, ctx)
    return loops if nest is None else with_loop_fragment(loops, nest)


# --------------------------------------------------------------------------- atomics
def _single_trip(stmt: Any) -> Any:
    """Wrap every store in a one-trip loop: vector lanes must not merge atomic updates."""

    def on_store(store: Any) -> Any:
        return tirx.For(tirx.Var("a", "int32"), 0, 1, tirx.ForKind.SERIAL, store)

    return tvm_ffi.structural_map(stmt, (tirx.BufferStore, on_store))


def lower_atomic_simt(op: TileOp, ctx: LowerContext) -> Any:
    """The generic update, run by the owners of a fragment value, one element per store."""
    assert isinstance(op, Atomic)
    stmt = _single_trip(lower_atomic_update(op, ctx))
    if isinstance(op.value, Region):
        nest = _nest_fragment(op.value, ctx)
        if nest is not None:
            return with_loop_fragment(stmt, nest)
    return stmt


# --------------------------------------------------------------------------- cumsum
def lower_cumsum_simt(op: TileOp, ctx: LowerContext, copy: LoweringRule | None = None) -> Any:
    """A scan over shared memory (``_row_scans``).

    A fragment source or destination is staged through a shared scratch tile: the
    fragment's owners copy it in (or out) with the target's copy rule ``copy``
    (:func:`lower_copy_simt` by default), the scan runs on the scratch tile. In place on a
    fragment, one scratch tile serves both.
    """
    copy = copy or lower_copy_simt
    assert isinstance(op, Cumsum)
    src, dst = op.src, op.dst
    before: list[Any] = []
    after: list[Any] = []
    staged: dict[Any, Region] = {}

    def scratch_for(region: Region, role: str) -> Region:
        for buffer, tile in staged.items():
            if buffer.same_as(region.buffer):
                return tile
        shape = [as_int(e) for e in region.extents]
        if any(e is None for e in shape):
            raise ctx.error(
                UnsupportedOnTargetError,
                f"T.cumsum of the fragment {region.name} needs static extents on {ctx.target.kind}",
                hint="give the fragment a constant shape",
            )
        buffer = tirx.decl_buffer(shape, op.dst.dtype, name=f"{region.name}_{role}", scope="shared")
        before.append(tirx.AllocBuffer(buffer))
        tile = Region.full(buffer)
        staged[region.buffer] = tile
        return tile

    if is_fragment_buffer(src.buffer):
        tile = scratch_for(src, "scan_in")
        before.append(copy(Copy(src, tile), ctx))
        src = tile
    if is_fragment_buffer(dst.buffer):
        tile = scratch_for(dst, "scan_out")
        after.append(copy(Copy(tile, dst), ctx))
        dst = tile
    scan = _row_scans(Cumsum(src, dst, op.dim, op.reverse, op.kind), ctx)
    # The barriers order the scan after the writes that filled the tile and before the reads
    # of its result, whatever threads those were.
    return tirx.SeqStmt([*before, shared_barrier(), scan, shared_barrier(), *after])


MAX_SCAN_REGISTERS = 64
"""Elements of one row segment a thread scans in registers (``T.cumsum`` on a GPU)."""


def _row_scans(op: Cumsum, ctx: LowerContext) -> Any:
    """Rows scanned by ``p`` lanes each: registers, then shuffles across the lanes.

    Thread ``t`` takes lane ``t % p`` of row ``t // p`` (plus ``T / p`` per further pass)
    and the lane's segment of ``L = ceil(N / p)`` consecutive elements: it reads them
    into registers (a loop that only reads the buffer), scans them there, adds the
    sum of the lower lanes' segments (``tile::shfl_idx`` within the ``p`` lanes, run by
    every thread of the warp) and writes them back (a loop that only writes). No loop
    both reads and writes shared memory, so TVM's ThreadSync has no loop-carried
    dependence to guard with a barrier inside the row guard (which it cannot place;
    a serial ``dst[k] = dst[k - 1] + src[k]`` scan needed exactly that). ``dst`` may
    alias ``src``: a segment is read whole before it is written.
    """
    threads, tx = ctx.threads, ctx.thread_var
    extents = [as_int(e) for e in op.src.extents]
    if threads is None or tx is None or any(e is None for e in extents):
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.cumsum of {op.src.name} needs static extents inside a T.Kernel with threads=",
            hint="give the scanned buffer a constant shape",
        )
    sizes = [int(e or 0) for e in extents]
    n = sizes[op.dim]
    kept = [e for d, e in enumerate(sizes) if d != op.dim]
    rows = math.prod(kept)
    warp = ctx.capabilities.warp_size
    lanes = 1
    while lanes * 2 <= min(warp, n) and rows * lanes * 2 <= threads:
        lanes *= 2
    span = -(-n // lanes)
    if span > MAX_SCAN_REGISTERS:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.cumsum of {op.src.name}: {rows} rows of {n} over {threads} threads leave "
            f"{span} elements per thread (at most {MAX_SCAN_REGISTERS} are scanned in registers)",
            hint="scan shorter rows (split the tile), or launch more threads",
        )
    per_pass = threads // lanes
    dtype = op.dst.dtype
    identity = reduce_identity(op.kind, dtype)  # 0 for a sum, the lowest value for a maximum
    i32 = "int32"
    lane = tirx.floormod(tx, lanes) if lanes > 1 else tirx.const(0, i32)
    reg = tirx.decl_buffer((span,), dtype, name=f"{op.dst.name}_scan", scope="local")
    body: list[Any] = [tirx.AllocBuffer(reg)]

    def over_span(make: Any) -> Any:
        """``for k in range(span): make(k)`` with a fresh ``k`` (every loop binds its own var)."""
        k = fresh_vars("k", 1)[0]
        bind_ranges(ctx.analyzer, [k], [tirx.const(span, i32)])
        return tirx.For(k, 0, span, tirx.ForKind.SERIAL, make(k))

    for first in range(0, rows, per_pass):
        row = tirx.floordiv(tx, lanes) + first
        coords: list[Any] = []
        rest = row
        for extent in reversed(kept):
            coords.insert(0, tirx.floormod(rest, extent))
            rest = tirx.floordiv(rest, extent)

        def at(region: Region, k: Any, coords: list[Any] = coords) -> list[Any]:
            element = lane * span + k
            pos = (n - 1 - element) if op.reverse else element
            it = iter(coords)
            return [lo + (pos if d == op.dim else next(it)) for d, lo in enumerate(region.mins)]

        def inside(k: Any, row: Any = row, last_pass: bool = first + per_pass > rows) -> Any:
            cond = lane * span + k < n
            return ctx.analyzer.simplify(tirx.And(row < rows, cond) if last_pass else cond)

        def read(k: Any, at: Any = at, inside: Any = inside) -> Any:
            load = cast_to(dtype, tirx.BufferLoad(op.src.buffer, at(op.src, k)))
            pad = tirx.BufferStore(reg, identity, [k])  # past the row's end: adds nothing
            return tirx.IfThenElse(inside(k), tirx.BufferStore(reg, load, [k]), pad)

        def write(k: Any, at: Any = at, inside: Any = inside) -> Any:
            store = tirx.BufferStore(op.dst.buffer, tirx.BufferLoad(reg, [k]), at(op.dst, k))
            return tirx.IfThenElse(inside(k), store, None)

        body.append(over_span(read))
        for step in range(1, span):
            here, before = [tirx.const(step, i32)], [tirx.const(step - 1, i32)]
            running = op.combine(tirx.BufferLoad(reg, before), tirx.BufferLoad(reg, here))
            body.append(tirx.BufferStore(reg, running, here))
        if lanes > 1:
            # offset = the segment totals of the lower lanes combined; every lane runs every
            # shuffle (a full-mask shfl in a divergent branch is undefined), the choice is after
            offset = tirx.decl_buffer((2,), dtype, name=f"{op.dst.name}_carry", scope="local")
            last = tirx.BufferLoad(reg, [tirx.const(span - 1, i32)])
            zero, got = [tirx.const(0, i32)], [tirx.const(1, i32)]
            body += [tirx.AllocBuffer(offset), tirx.BufferStore(offset, identity, zero)]
            for src_lane in range(lanes - 1):
                width = tirx.const(lanes, i32)
                shuffled = tirx.call_extern(dtype, "tile::shfl_idx", last, tirx.const(src_lane, i32), width)
                body.append(tirx.BufferStore(offset, shuffled, got))
                add = tirx.Select(lane > src_lane, tirx.BufferLoad(offset, got), identity)
                body.append(tirx.BufferStore(offset, op.combine(tirx.BufferLoad(offset, zero), add), zero))
            carry = tirx.BufferLoad(offset, zero)
            body.append(
                over_span(
                    lambda k, carry=carry: tirx.BufferStore(
                        reg, op.combine(tirx.BufferLoad(reg, [k]), carry), [k]
                    )
                )
            )
        body.append(over_span(write))
    return tirx.SeqStmt(body)


# --------------------------------------------------------------------------- reduce
def _identity(kind: str, dtype: str) -> Any:
    return reduce_identity(kind, dtype)  # bfloat16 included (TVM makes no bfloat16 infinity)


def _combine(kind: str, acc: Any, value: Any) -> Any:
    """Fold ``value`` (already made non-negative for ``abssum``/``absmax``) into ``acc``."""
    return reduce_combine(_CROSS.get(kind, kind), acc, value)


_CROSS = {"abssum": "sum", "absmax": "max", "absmax_nan": "max_nan"}
"""How partial results of a reduction combine across threads."""


def _plan_reduce(src: Fragment, dim: int, threads: int) -> list[int]:
    """The thread-id bits over which threads combine partial results (xor butterfly).

    Two threads combine over bit ``b`` when, local by local, they hold the same row
    (the element's coordinates without ``dim``) or one of them holds nothing there;
    every row's holders must be connected by those bits.
    """
    rows: dict[tuple[int, tuple[int, ...]], int] = {}  # (thread, local) -> row id
    row_ids: dict[tuple[int, ...], int] = {}
    for coord, _rep, thread, local in src.enumerate_threads():
        key = tuple(c for d, c in enumerate(coord) if d != dim)
        row_ids.setdefault(key, len(row_ids))
        rows[(thread, tuple(local))] = row_ids[key]
    local_rows: dict[int, dict[tuple[int, ...], int]] = {}
    for (thread, local), row in rows.items():
        local_rows.setdefault(thread, {})[local] = row
    holders: dict[int, set[int]] = {}
    for (thread, _local), row in rows.items():
        holders.setdefault(row, set()).add(thread)
    bits = []
    for b in range(max(threads - 1, 1).bit_length()):
        ok = True
        for t, held in local_rows.items():
            other = local_rows.get(t ^ (1 << b), {})
            if any(other.get(k, row) != row for k, row in held.items()):
                ok = False
                break
        if ok:
            bits.append(b)
    span = {0}
    for b in bits:
        span |= {s ^ (1 << b) for s in span}
    for threads_of_row in holders.values():
        start = min(threads_of_row)
        if not threads_of_row <= {start ^ s for s in span}:
            raise UnsupportedOnTargetError(
                "this reduction's source fragment spreads a row over threads that no xor-butterfly connects",
                hint="reduce a fragment laid out row-major over the threads, or an mma accumulator",
            )
    return bits


def _dst_coords(op: Reduce, kept: list[Any]) -> list[Any]:
    """The destination coordinates of a source element's kept coordinates.

    As in the generic rule, the destination may spell unit extents the source does not
    have, or drop the source's: a full reduction of a 1-D fragment writes ``s[0]`` of a
    ``(1,)`` buffer from no kept coordinate at all.
    """
    src_extents = [e for d, e in enumerate(op.src.extents) if d != op.dim]
    dense = iter([c for c, e in zip(kept, src_extents, strict=True) if as_int(e) != 1])
    dst = zip(op.dst.mins, op.dst.extents, strict=True)
    return [lo if as_int(e) == 1 else lo + next(dense) for lo, e in dst]


def lower_reduce_simt(op: TileOp, ctx: LowerContext) -> Any:
    """Per-thread partials, ``tile::shfl_xor`` across lanes, shared memory across warps."""
    assert isinstance(op, Reduce)
    src, dst = _fragment_of(op.src, ctx), _fragment_of(op.dst, ctx)
    if src is None or dst is None or ctx.thread_var is None or ctx.threads is None:
        return lower_reduce_loops(op, ctx)
    # A replicated source (a reduction's result reduced again, held by 2+ threads each):
    # only replica 0 contributes an element, the other copies add the identity, and the
    # butterfly, which connects every holder of a row, hands the total to all of them.
    replicated = src.replicate_size > 1
    threads, tx, dim = ctx.threads, ctx.thread_var, op.dim
    bits = _plan_reduce(src, dim, threads)
    acc_dtype = op.dst.dtype
    acc = tirx.decl_buffer((dst.locals_per_thread(),), acc_dtype, name=f"{op.dst.name}_acc", scope="local")
    old = tirx.decl_buffer((dst.locals_per_thread(),), acc_dtype, name=f"{op.dst.name}_old", scope="local")
    # Which (thread, local) pairs are real elements, and the constant dst slot of each local.
    valid: dict[int, set[int]] = {}
    slots: dict[int, set[int]] = {}
    for coord, _rep, thread, local in src.enumerate_threads():
        flat = local[0] if len(local) == 1 else None
        if flat is None:
            raise ctx.error(UnsupportedOnTargetError, "multi-dimensional fragment locals are not supported")
        valid.setdefault(flat, set()).add(thread)
        kept = _dst_coords(op, [c for d, c in enumerate(coord) if d != dim])
        slot = int(dst.map_forward_index(kept)[0]) if len(dst.get_output_shape()) == 1 else None
        if slot is None:
            raise ctx.error(UnsupportedOnTargetError, "multi-dimensional fragment locals are not supported")
        slots.setdefault(flat, set()).add(slot)
    if any(len(s) != 1 for s in slots.values()):
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.reduce_{op.kind}: the destination slot of a local of {op.src.name} differs between threads",
            hint="use a row-major or mma accumulator fragment as the reduction source",
        )
    used = sorted({next(iter(s)) for s in slots.values()})
    src_buf, dst_buf = op.src.buffer, op.dst.buffer
    identity = _identity(op.kind, acc_dtype)
    cross = _CROSS.get(op.kind, op.kind)
    body: list[Any] = [tirx.AllocBuffer(acc)]
    body += [tirx.BufferStore(acc, identity, [tirx.const(s, "int32")]) for s in used]
    # (slot, dst coords, src coords, guard of the store, guard of the contribution)
    per_local: list[tuple[int, list[Any], Any, Any, Any]] = []
    # a fragment on fewer threads than the block (a 7 x 5 tile held by 7 of 32 threads):
    # the inverse's guard assumes a thread below the fragment's extent
    used_threads = int(src.get_thread_size())
    for flat in sorted(slots):
        replica: Any = None
        if replicated:
            coords, replica, ok = fragment_replica_coords(src, tx, tirx.const(flat, "int32"))
        else:
            coords, ok = fragment_coords(src, tx, tirx.const(flat, "int32"))
        coords = [ctx.analyzer.simplify(c) for c in coords]
        kept = _dst_coords(op, [c for d, c in enumerate(coords) if d != dim])
        if used_threads < threads:
            ok = tirx.And(tirx.LT(tx, tirx.const(used_threads, "int32")), ok)
        guard = None if len(valid[flat]) == threads else ctx.analyzer.simplify(ok)
        adds = guard
        if replica is not None:
            first = tirx.EQ(replica, tirx.const(0, str(replica.dtype)))
            adds = ctx.analyzer.simplify(first if guard is None else tirx.And(guard, first))
        per_local.append((next(iter(slots[flat])), kept, coords, guard, adds))

    def guarded(stmt: Any, guard: Any) -> Any:
        return stmt if guard is None else tirx.IfThenElse(guard, stmt, None)

    # Reading or writing a row's result once per thread is enough: later locals of an
    # unguarded row would only repeat the same store.
    once: list[tuple[int, list[Any], list[Any], Any, Any]] = []
    seen: set[int] = set()
    for item in per_local:
        if item[3] is None and item[0] in seen:
            continue
        seen.add(item[0])
        once.append(item)

    if not op.clear:
        body.append(tirx.AllocBuffer(old))
        for slot, kept, _coords, guard, _adds in once:
            load = reduce_start(op.kind, tirx.BufferLoad(dst_buf, kept))
            body.append(guarded(tirx.BufferStore(old, load, [tirx.const(slot, "int32")]), guard))
    for slot, _kept, coords, _guard, guard in per_local:
        value = tirx.BufferLoad(src_buf, coords)
        if str(value.ty) != acc_dtype:
            value = tirx.Cast(acc_dtype, value)
        if op.kind in ("abssum", "absmax", "absmax_nan"):
            value = tirx.abs(value)
        at = [tirx.const(slot, "int32")]
        body.append(
            guarded(tirx.BufferStore(acc, _combine(op.kind, tirx.BufferLoad(acc, at), value), at), guard)
        )
    warp = ctx.capabilities.warp_size
    lane_bits = [b for b in bits if (1 << b) < warp]
    warp_bits = [b for b in bits if (1 << b) >= warp]
    if lane_bits:  # the shuffled value lands in a local first: a combine may read it twice
        partner = tirx.decl_buffer((1,), acc_dtype, name=f"{op.dst.name}_partner", scope="local")
        body.append(tirx.AllocBuffer(partner))
    for b in lane_bits:
        for slot in used:
            at = [tirx.const(slot, "int32")]
            current = tirx.BufferLoad(acc, at)
            other = tirx.call_extern(acc_dtype, "tile::shfl_xor", current, tirx.const(1 << b, "int32"))
            body.append(tirx.BufferStore(partner, other, [0]))
            body.append(tirx.BufferStore(acc, _combine(cross, current, tirx.BufferLoad(partner, [0])), at))
    if warp_bits:
        # After the shuffles the lanes that differ only in lane_bits hold the same partials:
        # one slot per group of them, the thread index with those bits taken out (`key`),
        # written by the group's first lane. key is linear over xor, so a partner p's
        # slot is key(tx) ^ key(p).
        kept_bits = [b for b in range(max(threads - 1, 1).bit_length()) if b not in lane_bits]

        runs: list[tuple[int, int, int]] = []  # (first bit, width, position in the key)
        for position, b in enumerate(kept_bits):
            if runs and runs[-1][0] + runs[-1][1] == b:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1, runs[-1][2])
            else:
                runs.append((b, 1, position))

        def key(t: Any) -> Any:
            out: Any = tirx.const(0, "int32")
            for first, width, position in runs:
                field = tirx.bitwise_and(tirx.shift_right(t, tirx.const(first, "int32")),
                                         tirx.const((1 << width) - 1, "int32"))  # fmt: skip
                out = out + tirx.shift_left(field, tirx.const(position, "int32"))
            return ctx.analyzer.simplify(out)

        def key_of(p: int) -> int:
            return sum(((p >> b) & 1) << position for position, b in enumerate(kept_bits))

        groups = max(key_of(t) for t in range(threads)) + 1
        ws = tirx.decl_buffer((groups, len(used)), acc_dtype, name=f"{op.dst.name}_ws", scope="shared")
        body.append(tirx.AllocBuffer(ws))
        mine = key(tx)
        lane_mask = sum(1 << b for b in lane_bits)
        writes = [tirx.BufferStore(ws, tirx.BufferLoad(acc, [tirx.const(s, "int32")]), [mine, k])
                  for k, s in enumerate(used)]  # fmt: skip
        first_lane = tirx.EQ(tirx.bitwise_and(tx, tirx.const(lane_mask, "int32")), tirx.const(0, "int32"))
        store = writes[0] if len(writes) == 1 else tirx.SeqStmt(writes)
        body.append(tirx.IfThenElse(first_lane, store, None) if lane_mask else store)
        body.append(shared_barrier())
        partners = [0]
        for b in warp_bits:
            partners += [p ^ (1 << b) for p in partners]
        for k, slot in enumerate(used):
            at = [tirx.const(slot, "int32")]
            total = tirx.BufferLoad(ws, [mine, k])
            for p in partners[1:]:
                other = tirx.bitwise_xor(mine, tirx.const(key_of(p), "int32"))
                combined = _combine(cross, total, tirx.BufferLoad(ws, [other, k]))
                if threads & (threads - 1):  # 96 threads: tx ^ 64 may name no thread; skip it
                    partner = tirx.bitwise_xor(tx, tirx.const(p, "int32"))
                    exists = tirx.LT(partner, tirx.const(threads, "int32"))
                    combined = tirx.if_then_else(exists, combined, total)
                total = combined
            body.append(tirx.BufferStore(acc, total, at))
        body.append(shared_barrier())
    for slot, kept, _coords, guard, _adds in once:
        result: Any = tirx.BufferLoad(acc, [tirx.const(slot, "int32")])
        if not op.clear:
            result = _combine(cross, tirx.BufferLoad(old, [tirx.const(slot, "int32")]), result)
        body.append(guarded(tirx.BufferStore(dst_buf, result, kept), guard))
    return tirx.SeqStmt(body)


def lower_cumsum_with(copy: LoweringRule) -> LoweringRule:
    """The cumsum rule staging fragments with ``copy`` (a vendor's copy rule with its own cases)."""

    def lower_cumsum(op: TileOp, ctx: LowerContext) -> Any:
        return lower_cumsum_simt(op, ctx, copy)

    return lower_cumsum


def register_simt_lowerings(target_kind: str, copy: LoweringRule = lower_copy_simt) -> None:
    """Register the SIMT rules for ``target_kind``: copy (``copy``), fill, atomics, cumsum, reduce.

    A vendor whose copies have special cases (CUDA's ``stmatrix``) passes its own copy rule,
    which then also stages the fragments ``T.cumsum`` scans. Rules registered later for the
    same op and target (a vendor's ``when=`` rules) win over these.

    Example::

        register_simt_lowerings("hip")
    """
    register_lowering(Copy, target=target_kind)(copy)
    register_lowering(Fill, target=target_kind)(lower_fill_simt)
    register_lowering(Atomic, target=target_kind)(lower_atomic_simt)
    register_lowering(Cumsum, target=target_kind)(lower_cumsum_with(copy))
    register_lowering(Reduce, target=target_kind)(lower_reduce_simt)
