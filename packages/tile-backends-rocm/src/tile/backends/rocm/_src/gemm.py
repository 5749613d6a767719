"""``T.gemm`` on CDNA matrix cores: ``v_mfma_f32_16x16x16{f16,bf16}`` per wave64.

The block's waves split the ``M x N`` accumulator as ``infer_layout`` did
(``layout_rules.warp_partition`` with 16 x 16 tiles and 64-lane waves, under the gemm's
``GemmWarpPolicy``); wave ``wm * waves_n + wn`` owns sub-tile ``(wm, wn)`` and holds it
as tile-layout's ``make_mfma_block_fragment`` says: per 16x16 tile, 4 consecutive
fp32 registers (lane ``l``, register ``g`` = ``D[4(l//16) + g][l%16]``).

Each wave walks K in steps of 16. Per step it loads, for each of its 16-row A tiles
and 16-column B tiles, the lane's 4 operand elements from LDS into registers (lane
``l`` holds ``A[l%16][4(l//16) + v]`` and ``B[4(l//16) + v][l%16]``, v = 0..3, the
operand fragments of tile-layout's ``mfma_16x16x16_a/_b``), then issues one
``tile_mfma_f32_16x16x16_*`` (``tile_hip.h``) per (A tile, B tile) pair.

A fragment (register) operand, such as the dequantized weights of a dequantized GEMM, takes
the MFMA operand layout from ``infer_layout`` (``layout_rules.gemm_fragments``), and the
MFMA reads its registers in place; one in any other layout is first stored to an LDS
scratch tile by its owners, and the wave reads its operand registers from there.

Dtypes without an MFMA here (float32, int8) and tiles that do not split into 16x16x16
tiles over whole waves fall back to ``lower_gemm_simt``: scalar multiply-adds per thread.

LDS layout: a shared operand takes ``infer_layout``'s XOR swizzle (``make_swizzled_layout``:
rows cut into 32-, 64- or 128-byte spans, the widest the row allows, whose 16-byte chunks
are XOR-permuted by row), and the ROCm pipeline applies it to the LDS storage
(``apply_shared_layouts``). ``lds.lds_bank_conflicts`` counts the bank conflicts of the
f16/bf16 operand reads above (16x16 or 32x32 tiles) under CDNA's LDS model (its docstring
cites the sources and states the assumptions): reads of a ``[K][MN]`` operand (B, or A
transposed: one ``ds_read_u16`` per element) are conflict-free; reads of an ``[MN][K]``
operand (A, or B transposed: one ``ds_read_b64`` per lane) are 2-way, the least a layout
that keeps 16-byte chunks whole allows (row-major storage: 8-way at K = 32, 16-way at
K = 64). ``tests/test_rocm_lds_banks.py`` checks the layouts compiled gemms get.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

from tvm import tirx  # type: ignore[import-untyped]

from tile.backends.cuda._src.gemm import _stage_fragment, lower_gemm_simt, tile_local_base
from tile.ir.errors import UnsupportedOnTargetError
from tile.ir.ops import Gemm, LowerContext
from tile.ir.ops.layout_rules import is_fragment_buffer, is_shared_buffer, warp_partition
from tile.ir.ops.region import Region, as_int
from tile.ir.ops.registry import register_lowering
from tile.ir.transform.lower_fragments import fragment_coords
from tile.layout import Fragment
from tile.layout.hardware.amd import mfma_16x16x16_a, mfma_16x16x16_b, mfma_16x16x16_d

WAVE = 64
TILE = 16
"""M, N and K of one MFMA."""
PER_LANE = 4
"""Operand elements (and accumulator registers) one lane holds per 16x16x16 MFMA."""
Operand = Literal["A", "B"]

MFMA_WRAPPERS = {
    ("float16", "float32"): "tile_mfma_f32_16x16x16_f16",
    ("bfloat16", "float32"): "tile_mfma_f32_16x16x16_bf16",
}
"""``(operand dtype, accumulator dtype) -> tile_hip.h wrapper`` of the 16x16x16 MFMAs."""


def _slots(frag: Fragment) -> dict[tuple[int, tuple[int, ...]], int]:
    """(thread, coord) -> flat local index, for every element of ``frag`` and every replica."""
    shape = [int(e) for e in frag.get_output_shape()]
    out: dict[tuple[int, tuple[int, ...]], int] = {}
    for coord, _rep, thread, local in frag.enumerate_threads():
        flat = 0
        for index, extent in zip(local, shape, strict=True):
            flat = flat * extent + index
        out[(thread, tuple(coord))] = flat
    return out


def _at(region: Region, row: Any, col: Any) -> list[Any]:
    """Indices of element (row, col) of the 2-D view of ``region`` (unit dims skipped)."""
    pair = iter([row, col])
    if len(region.extents) == 2:
        return [lo + next(pair) for lo in region.mins]
    return [
        lo if as_int(e) == 1 else lo + next(pair) for lo, e in zip(region.mins, region.extents, strict=True)
    ]


def _seq(stmts: list[Any]) -> Any:
    """A statement list as one statement (TVM refuses a SeqStmt of length 1)."""
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _call(name: str, *args: Any) -> Any:
    return tirx.Evaluate(tirx.call_extern("void", name, *args))


def _barrier() -> Any:
    return tirx.Evaluate(tirx.op.tvm_storage_sync("shared"))


@dataclasses.dataclass
class _Plan:
    op: Gemm
    m: int
    n: int
    k: int
    waves_m: int
    waves_n: int
    tx: Any

    @property
    def wave_m(self) -> int:
        return self.m // self.waves_m

    @property
    def wave_n(self) -> int:
        return self.n // self.waves_n

    @property
    def lane(self) -> Any:
        return tirx.floormod(self.tx, WAVE)

    @property
    def row0(self) -> Any:
        return tirx.floordiv(tirx.floordiv(self.tx, WAVE), self.waves_n) * self.wave_m

    @property
    def col0(self) -> Any:
        return tirx.floormod(tirx.floordiv(self.tx, WAVE), self.waves_n) * self.wave_n


def operand_element(which: Operand, lane: Any, v: int) -> tuple[Any, Any]:
    """``(mn, k)`` of operand element ``v`` of ``lane`` in one 16x16 A or B tile.

    From tile-layout's MFMA operand fragments (their inverse), so the gemm and the
    accumulator layout come from one place; the emulator checks them independently.
    """
    base = mfma_16x16x16_a() if which == "A" else mfma_16x16x16_b()
    coords, _ = fragment_coords(base, lane, tirx.const(v, "int32"))
    return (coords[0], coords[1]) if which == "A" else (coords[1], coords[0])


def _register_operand(
    plan: _Plan, which: Operand, region: Region, transposed: bool, ctx: LowerContext
) -> Callable[[Any, int], Any] | None:
    """``pointer(kk, tile)`` to a register operand's own 4 elements, if it is in MFMA operand order.

    That is the layout ``infer_layout`` gives a register A/B operand (tile-layout's
    ``mfma_16x16x16_a/_b`` per wave, replicated over the other wave dimension): every
    lane of every wave must hold its 4 elements of each (k-step, tile) at the same 4
    consecutive locals. ``None``: some other layout (then the operand goes through LDS).
    """
    frag = ctx.layouts.get(region.name)
    if not isinstance(frag, Fragment) or transposed or len(region.extents) != 2:
        return None
    slots = _slots(frag)
    base = mfma_16x16x16_a() if which == "A" else mfma_16x16x16_b()
    count = plan.wave_m // TILE if which == "A" else plan.wave_n // TILE
    for wave in range(plan.waves_m * plan.waves_n):
        r0, c0 = (wave // plan.waves_n) * plan.wave_m, (wave % plan.waves_n) * plan.wave_n
        for kk in range(plan.k // TILE):
            for tile in range(count):
                origin = (r0 + tile * TILE, kk * TILE) if which == "A" else (kk * TILE, c0 + tile * TILE)
                if tile_local_base(slots, base, origin, wave * WAVE) is None:
                    return None
    mn_first, k_first = operand_element(which, plan.lane, 0)

    def pointer(kk: Any, tile: int) -> Any:
        if which == "A":
            row, col = plan.row0 + tile * TILE + mn_first, kk * TILE + k_first
        else:
            row, col = kk * TILE + k_first, plan.col0 + tile * TILE + mn_first
        return tirx.address_of(tirx.BufferLoad(region.buffer, _at(region, row, col)))

    return pointer


def _loader(
    plan: _Plan, which: Operand, region: Region, transposed: bool, regs: Any
) -> Callable[[Any, int], list[Any]]:
    """``load(kk, tile) -> stmts``: this lane's 4 elements of A tile / B tile ``tile`` at k-step ``kk``."""
    mn0 = plan.row0 if which == "A" else plan.col0
    # Storage is [MN][K] for A untransposed and B transposed, [K][MN] otherwise.
    k_last = (which == "A") != transposed

    def load(kk: Any, tile: int) -> list[Any]:
        out = []
        for v in range(PER_LANE):
            mn, k = operand_element(which, plan.lane, v)
            mn = mn0 + tile * TILE + mn
            k = kk * TILE + k
            index = _at(region, mn, k) if k_last else _at(region, k, mn)
            out.append(tirx.BufferStore(regs, tirx.BufferLoad(region.buffer, index), [tile * PER_LANE + v]))
        return out

    return load


def _register_pointer(regs: Any) -> Callable[[Any, int], Any]:
    return lambda kk, tile: regs.access_ptr("r", offset=tile * PER_LANE, extent=PER_LANE)


def lower_gemm_mfma(op: Any, ctx: LowerContext) -> Any:
    """``T.gemm`` with 16x16x16 MFMAs (see module docstring)."""
    assert isinstance(op, Gemm)
    where = "T.gemm on CDNA matrix cores"
    m, n, k = (as_int(e) for e in op.mnk)
    if m is None or n is None or k is None:
        raise ctx.error(
            UnsupportedOnTargetError, f"{where} needs constant M, N, K", hint="use constant tile sizes"
        )
    wrapper = MFMA_WRAPPERS.get((op.a.dtype, op.c.dtype))
    threads, tx = ctx.threads, ctx.thread_var
    c_frag = ctx.layouts.get(op.c.name)
    if (
        threads is None
        or tx is None
        or not isinstance(c_frag, Fragment)
        or not is_fragment_buffer(op.c.buffer)
    ):
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where} needs a fragment accumulator with an inferred layout inside a kernel",
            hint="allocate C with T.alloc_fragment and call T.gemm inside `with T.Kernel(..., threads=...)`",
        )
    waves = threads // WAVE
    waves_m, waves_n = warp_partition(m, n, waves, TILE, TILE, op.policy) if waves else (0, 0)
    if wrapper is None or op.b.dtype != op.a.dtype or waves_m == 0 or k % TILE or threads % WAVE:
        # No MFMA for these dtypes (float32, int8, mixed), or the tile does not split into
        # 16x16x16 tiles over whole waves: every thread computes its own accumulator elements.
        return lower_gemm_simt(op, ctx, c_frag, k)
    plan = _Plan(op, m, n, k, waves_m, waves_n, tx)
    mt, nt = plan.wave_m // TILE, plan.wave_n // TILE

    # The accumulator must hold each 16x16 tile as 4 consecutive registers in MFMA order,
    # at the same local index on every lane of every wave.
    c_slots, c_base = _slots(c_frag), mfma_16x16x16_d()
    c_locals: dict[tuple[int, int], int] = {}
    for wave in range(waves):
        r0, c0 = (wave // waves_n) * plan.wave_m, (wave % waves_n) * plan.wave_n
        for mi in range(mt):
            for ni in range(nt):
                start = tile_local_base(c_slots, c_base, (r0 + mi * TILE, c0 + ni * TILE), wave * WAVE)
                if start is None or c_locals.setdefault((mi, ni), start) != start:
                    raise ctx.error(
                        UnsupportedOnTargetError,
                        f"{where}: the accumulator {op.c.name} is not in MFMA register order (16x16 tiles)",
                        hint="let T.gemm choose the accumulator layout (no T.annotate_layout on it)",
                    )

    def c_ptr(mi: int, ni: int) -> Any:
        coords = fragment_coords(c_frag, tx, tirx.const(c_locals[(mi, ni)], "int32"))[0]
        return tirx.address_of(tirx.BufferLoad(op.c.buffer, _at(op.c, coords[0], coords[1])))

    stmts: list[Any] = []
    if op.clear_accum:
        local = tirx.Var("l", "int32")
        coords = fragment_coords(c_frag, tx, local)[0]
        zero = tirx.BufferStore(op.c.buffer, tirx.const(0, op.c.dtype), _at(op.c, coords[0], coords[1]))
        stmts.append(tirx.For(local, 0, c_frag.locals_per_thread(), tirx.ForKind.UNROLLED, zero))

    loaders: dict[str, Callable[[Any, int], list[Any]]] = {}
    pointers: dict[str, Callable[[Any, int], Any]] = {}
    operands: Sequence[tuple[Operand, Region, bool, int]] = (
        ("A", op.a, op.transpose_a, mt),
        ("B", op.b, op.transpose_b, nt),
    )
    for which, region, transposed, count in operands:
        source = region
        if is_fragment_buffer(region.buffer):
            in_place = _register_operand(plan, which, region, transposed, ctx)
            if in_place is not None:
                pointers[which] = in_place
                continue
            source, staged = _stage_fragment(op, region, ctx)
            stmts.extend(staged)
        elif not is_shared_buffer(region.buffer):
            raise ctx.error(
                UnsupportedOnTargetError,
                f"{where}: operand {which} ({region.name}) must be in shared memory or a fragment",
                hint="T.copy it into a T.alloc_shared buffer first",
            )
        regs = tirx.decl_buffer(
            (count * PER_LANE,), op.a.dtype, name=f"{region.name}_{which.lower()}_regs", scope="local"
        )
        stmts.append(tirx.AllocBuffer(regs))
        loaders[which] = _loader(plan, which, source, transposed, regs)
        pointers[which] = _register_pointer(regs)

    def k_step(kk: Any) -> Any:
        body: list[Any] = []
        for which, count in (("A", mt), ("B", nt)):
            if which in loaders:
                for tile in range(count):
                    body.extend(loaders[which](kk, tile))
        for mi in range(mt):
            for ni in range(nt):
                body.append(_call(wrapper, c_ptr(mi, ni), pointers["A"](kk, mi), pointers["B"](kk, ni)))
        return _seq(body)

    kk = tirx.Var("kk", "int32")
    stmts.append(tirx.For(kk, 0, k // TILE, tirx.ForKind.UNROLLED, k_step(kk)))
    return _seq(stmts)


register_lowering(Gemm, target="hip")(lower_gemm_mfma)
