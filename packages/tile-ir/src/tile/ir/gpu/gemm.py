"""Pieces of ``T.gemm`` every GPU backend shares, and the SIMT gemm.

The matrix-instruction lowerings (CUDA's mma.sync, wgmma and CuTe; ROCm's MFMA) hold the
accumulator ``C`` as the fragment ``infer_layout`` chose and address it in block
coordinates: ``C[coords]`` with ``coords`` the element that thread ``tx`` holds at local
``l`` (the inverse of the fragment), which ``lower_fragments`` rewrites to ``C_local[l]``.
What they share lives here: finding that accumulator (:func:`fragment_accumulator`),
clearing it (:func:`clear_accumulator`), checking that one instruction tile's registers
are consecutive locals (:func:`fragment_slots`, :func:`tile_local_base`), staging a
register operand through shared memory (:func:`stage_fragment`), and the fallback where
no instruction tiling fits (:func:`lower_gemm_simt`: scalar multiply-adds per thread).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from tvm import tirx  # type: ignore[import-untyped]

from tile.layout import Fragment

from ..errors import UnsupportedOnTargetError
from ..ops import Gemm, LowerContext
from ..ops.layout_rules import is_fragment_buffer
from ..ops.region import Region, as_int
from ..transform.lower_fragments import fragment_coords, fragment_replica_coords
from .statements import extern_call, seq, shared_barrier


class WarpTiles:
    """How a gemm's ``m x n`` block tile is split among ``warps_m x warps_n`` warps (wavefronts
    on AMD) of ``lanes`` threads: warp ``w`` owns the ``warp_m x warp_n`` sub-tile at row
    ``w // warps_n``, column ``w % warps_n``; ``tx`` is the thread index.

    A mixin for a vendor's gemm plan, which provides ``m``, ``n``, ``warps_m``, ``warps_n``,
    ``tx`` and ``lanes``.
    """

    m: int
    n: int
    warps_m: int
    warps_n: int
    tx: Any
    lanes: ClassVar[int]

    @property
    def warp_m(self) -> int:
        return self.m // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.n // self.warps_n

    def warp_origin(self, warp: int) -> tuple[int, int]:
        """``(row, col)`` of warp ``warp``'s sub-tile in the block tile."""
        return (warp // self.warps_n) * self.warp_m, (warp % self.warps_n) * self.warp_n

    @property
    def lane(self) -> Any:
        return tirx.floormod(self.tx, self.lanes)

    @property
    def row0(self) -> Any:
        """The first row of this thread's warp tile (an expression in ``tx``)."""
        return tirx.floordiv(tirx.floordiv(self.tx, self.lanes), self.warps_n) * self.warp_m

    @property
    def col0(self) -> Any:
        """The first column of this thread's warp tile (an expression in ``tx``)."""
        return tirx.floormod(tirx.floordiv(self.tx, self.lanes), self.warps_n) * self.warp_n


def constant_mnk(op: Gemm, ctx: LowerContext, where: str) -> tuple[int, int, int]:
    """``(M, N, K)`` of ``op``; a typed error naming ``where`` (the lowering) when one is symbolic."""
    m, n, k = (as_int(e) for e in op.mnk)
    if m is None or n is None or k is None:
        raise ctx.error(
            UnsupportedOnTargetError, f"{where} needs constant M, N, K", hint="use constant tile sizes"
        )
    return m, n, k


def operand_registers(
    region: Region, which: str, tiles: int, per_tile: int, dtype: str
) -> tuple[Any, Callable[[Any, int], Any]]:
    """A warp's operand ``which`` staged in registers: the local buffer for ``tiles`` instruction
    tiles of ``per_tile`` elements, and the pointer maker ``(kk, tile) -> pointer`` to one tile."""
    name = f"{region.name}_{which.lower()}_regs"
    regs = tirx.decl_buffer((tiles * per_tile,), dtype, name=name, scope="local")
    return regs, lambda kk, tile: regs.access_ptr("r", offset=tile * per_tile, extent=per_tile)


def mma_k_step(
    kk: Any,
    loaders: Mapping[str, Callable[[Any, int], list[Any]]],
    pointers: Mapping[str, Callable[[Any, int], Any]],
    tiles: tuple[int, int],
    wrapper: str,
    c_pointer: Callable[[int, int], Any],
) -> Any:
    """One K step of a warp's gemm on matrix instructions: the register loads of the operands
    read through registers (``loaders``, per tile), then ``wrapper(C, A, B)`` on every
    ``(mi, ni)`` of the warp's ``tiles = (mt, nt)`` instruction tiles."""
    mt, nt = tiles
    body: list[Any] = []
    for which, count in (("A", mt), ("B", nt)):
        if which in loaders:
            for tile in range(count):
                body.extend(loaders[which](kk, tile))
    for mi in range(mt):
        for ni in range(nt):
            body.append(extern_call(wrapper, c_pointer(mi, ni), pointers["A"](kk, mi), pointers["B"](kk, ni)))
    return seq(body)


def fragment_inverse(frag: Fragment, thread: Any, local: Any) -> list[Any]:
    """The block coordinates of the element ``thread`` holds at flat local ``local``
    (mma fragments fill their box, so ``fragment_coords``' padding guard is not needed)."""
    return fragment_coords(frag, thread, local)[0]


def fragment_slots(frag: Fragment, all_replicas: bool = False) -> dict[tuple[int, tuple[int, ...]], int]:
    """``(thread, coord) -> flat local index`` for every element of ``frag``.

    Replica 0 only, unless ``all_replicas`` (a replicated operand every wave reads in place).
    """
    shape = [int(e) for e in frag.get_output_shape()]
    out: dict[tuple[int, tuple[int, ...]], int] = {}
    for coord, rep, thread, local in frag.enumerate_threads():
        if rep and not all_replicas:
            continue
        flat = 0
        for index, extent in zip(local, shape, strict=True):
            flat = flat * extent + index
        out[(thread, tuple(coord))] = flat
    return out


def tile_local_base(
    slots: dict[tuple[int, tuple[int, ...]], int], base: Fragment, origin: Sequence[int], thread0: int
) -> int | None:
    """The local index where one instruction tile's registers start, if they are contiguous.

    ``base`` is the instruction fragment (e.g. the m16n8 C), ``origin`` its corner in
    block coordinates. Checked for the lanes of ``base`` (a warp or a wave) starting at
    ``thread0``: element ``i`` of lane ``l`` must sit at local ``start + i`` of thread
    ``thread0 + l``, the same ``start`` for every lane (the wrappers take one pointer for
    all lanes).
    """
    start: int | None = None
    for coord, _rep, lane, local in base.enumerate_threads():
        block = tuple(o + c for o, c in zip(origin, coord, strict=True))
        flat = slots.get((thread0 + lane, block))
        if flat is None:
            return None
        here = flat - local[0]
        if start is None:
            start = here
        elif here != start:
            return None
    return start


def element_indices(region: Region, row: Any, col: Any) -> list[Any]:
    """Indices of element (row, col) of the 2-D view of ``region`` (unit dims skipped)."""
    pair = iter([row, col])
    if len(region.extents) == 2:
        return [lo + next(pair) for lo in region.mins]
    return [
        lo if as_int(e) == 1 else lo + next(pair) for lo, e in zip(region.mins, region.extents, strict=True)
    ]


def unrolled(name: str, extent: int, body: Callable[[Any], Any]) -> Any:
    var = tirx.Var(name, "int32")
    return tirx.For(var, 0, extent, tirx.ForKind.UNROLLED, body(var))


def fragment_accumulator(op: Gemm, ctx: LowerContext, where: str) -> tuple[int, Any, Fragment]:
    """``(threads, thread var, C's fragment)`` of a gemm whose threads hold C in registers.

    The GPU gemms (mma.sync, CuTe, MFMA) all need it; a typed error when C is not a
    fragment with an inferred layout inside a ``T.Kernel`` with a thread count.
    """
    threads, tx = ctx.threads, ctx.thread_var
    c_frag = ctx.layouts.get(op.c.name)
    held = isinstance(c_frag, Fragment) and is_fragment_buffer(op.c.buffer)
    if threads is None or tx is None or not held or not isinstance(c_frag, Fragment):
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where} needs a fragment accumulator with an inferred layout inside a kernel",
            hint="allocate C with T.alloc_fragment and call T.gemm inside `with T.Kernel(..., threads=...)`",
        )
    return threads, tx, c_frag


def clear_accumulator(op: Gemm, c_frag: Fragment, tx: Any) -> Any:
    """``C = 0`` on each thread's own accumulator registers (``T.gemm(..., clear_accum=True)``)."""
    zero = tirx.const(0, op.c.dtype)
    return unrolled(
        "l",
        c_frag.locals_per_thread(),
        lambda local: tirx.BufferStore(
            op.c.buffer, zero, element_indices(op.c, *fragment_inverse(c_frag, tx, local))
        ),
    )


def stage_fragment(op: Gemm, region: Region, ctx: LowerContext) -> tuple[Region, list[Any]]:
    """Store a register operand to a shared-memory scratch tile: ``(scratch region, statements)``.

    Each element is stored once, by its replica-0 owner: a replicated fragment holds the
    element at the same local index on every replica, so the other owners have nothing to add.
    """
    frag = ctx.layouts.get(region.name)
    if not isinstance(frag, Fragment) or len(region.extents) != 2:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.gemm register operand {region.name} needs an inferred 2-D fragment layout",
            hint="copy the operand into a T.alloc_shared buffer first",
        )
    rows, cols = (as_int(e) for e in region.extents)
    if rows is None or cols is None:
        raise ctx.error(UnsupportedOnTargetError, f"T.gemm operand {region.name} needs a constant shape")
    scratch = tirx.decl_buffer((rows, cols), region.dtype, name=f"{region.name}_staged", scope="shared")
    local = tirx.Var("l", "int32")
    coords, replica, valid = fragment_replica_coords(frag, ctx.thread_var, local)
    coords = [ctx.analyzer.simplify(c) for c in coords]
    if frag.replicate_size > 1:
        valid = tirx.all(valid, replica == 0)
    value = tirx.BufferLoad(region.buffer, element_indices(region, *coords))
    store: Any = tirx.BufferStore(scratch, value, coords)
    if not ctx.analyzer.can_prove(valid):
        store = tirx.IfThenElse(valid, store, None)
    loop = tirx.For(local, 0, frag.locals_per_thread(), tirx.ForKind.UNROLLED, store)
    # The barrier before: readers of the previous contents (the last k-loop iteration) are done.
    stmts = [tirx.AllocBuffer(scratch), shared_barrier(), loop, shared_barrier()]
    return Region.full(scratch), stmts


def lower_gemm_simt(op: Gemm, ctx: LowerContext, c_frag: Fragment, k: int) -> Any:
    """``T.gemm`` without matrix instructions: each thread updates the accumulator elements it holds.

    The fallback of both GPU backends where no mma/MFMA tiling fits (a 16x16 tile on 4 warps,
    K not a multiple of the instruction's, float32 on ROCm).

    For every local ``l`` of ``C``'s fragment, the thread computes ``C[i, j] += sum_k
    A[i, k] * B[k, j]`` in the accumulator's dtype, reading the operands from shared memory (or
    global memory); a register operand is first stored to an shared memory scratch tile.
    """
    tx = ctx.thread_var
    if c_frag.replicate_size > 1:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.gemm on {ctx.target.kind}: the accumulator {op.c.name} is replicated over threads",
            hint="let T.gemm choose the accumulator layout (no T.annotate_layout on it)",
        )
    stmts: list[Any] = []
    sources: list[Region] = []
    for region in (op.a, op.b):
        if is_fragment_buffer(region.buffer):
            staged_region, staged = stage_fragment(op, region, ctx)
            stmts.extend(staged)
            sources.append(staged_region)
        else:
            sources.append(region)
    a_src, b_src = sources
    local, kv = tirx.Var("l", "int32"), tirx.Var("k", "int32")
    coords, valid = fragment_coords(c_frag, tx, local)
    i, j = (ctx.analyzer.simplify(c) for c in coords)
    acc = str(op.c.dtype)
    a_at = element_indices(a_src, kv, i) if op.transpose_a else element_indices(a_src, i, kv)
    b_at = element_indices(b_src, j, kv) if op.transpose_b else element_indices(b_src, kv, j)
    a = tirx.BufferLoad(a_src.buffer, a_at)
    b = tirx.BufferLoad(b_src.buffer, b_at)
    a = a if str(a.ty) == acc else tirx.Cast(acc, a)
    b = b if str(b.ty) == acc else tirx.Cast(acc, b)
    at = element_indices(op.c, i, j)
    update = tirx.BufferStore(op.c.buffer, tirx.BufferLoad(op.c.buffer, at) + a * b, at)
    body: list[Any] = []
    if op.clear_accum:
        body.append(tirx.BufferStore(op.c.buffer, tirx.const(0, acc), at))
    body.append(tirx.For(kv, 0, k, tirx.ForKind.SERIAL, update))
    element: Any = seq(body)
    if not ctx.analyzer.can_prove(valid):
        element = tirx.IfThenElse(valid, element, None)
    stmts.append(tirx.For(local, 0, c_frag.locals_per_thread(), tirx.ForKind.UNROLLED, element))
    return seq(stmts)
