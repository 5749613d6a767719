"""``T.gemm`` on CDNA matrix cores: single-block MFMAs per wave64.

Instructions (``MFMA_WRAPPERS``; ``tile_hip.h`` wrappers, ``tile_hip/mfma.h``):

* f16 / bf16 -> fp32: ``v_mfma_f32_32x32x8{f16,bf16}`` and ``v_mfma_f32_16x16x16{f16,bf16}``
  (CDNA2 spellings; CDNA3 ``..._f16`` / ``..._bf16``), 4 operand elements per lane;
* int8 -> int32 on CDNA2 (gfx90a): ``v_mfma_i32_32x32x8i8`` and ``v_mfma_i32_16x16x16i8``,
  4 bytes per lane;
* int8 -> int32 on CDNA3 (gfx942): ``v_mfma_i32_32x32x16_i8`` and ``v_mfma_i32_16x16x32_i8``,
  8 bytes per lane (CDNA3 dropped the K=8/K=16 int8 forms).

Which one, and how the block's waves split the ``M x N`` accumulator, is
``layout_rules.mfma_tiling`` (32x32 when the waves' sub-tiles split into 32x32 tiles and
K divides, else 16x16, under the gemm's ``GemmWarpPolicy``): the same decision
``infer_layout`` made for the accumulator, from the instructions ``capabilities`` lists
(``mma_instructions``: the arch's MFMAs that have a wrapper here). Wave ``wm * waves_n +
wn`` owns sub-tile ``(wm, wn)`` and holds it as tile-layout's ``make_mfma_block_fragment``
says: per 16x16 tile 4 consecutive registers (lane ``l``, register ``g`` =
``D[4(l//16) + g][l%16]``), per 32x32 tile 16 (``D[8(g//4) + 4(l//32) + g%4][l%32]``).

Each wave walks K in steps of the instruction's K. Per step it loads, for each of its A
tiles and B tiles, the lane's operand elements from LDS into registers (lane ``l`` of a
``T x T x K`` MFMA holds ``per_lane = K*T/64`` consecutive K elements of A row / B column
``l % T``, starting at ``per_lane * (l // T)``: tile-layout's ``mfma_operand``), then
issues one wrapper call per (A tile, B tile) pair. Where those elements are contiguous
and aligned in the operand's LDS layout on every lane (an ``[MN][K]`` operand under its
swizzle: 8 bytes of fp16/bf16, 4 or 8 of int8), decided at compile time with the bank
model's ``lds.merged_read_elements``, a lane reads them with one ``tile::copy_<bits>``
(``ds_read_b64`` / ``ds_read_b32``); otherwise (``[K][MN]`` operands, row-major or
staged tiles) element by element.

A fragment (register) operand, such as the dequantized weights of a dequantized GEMM, takes
the MFMA operand layout from ``infer_layout`` (``layout_rules.gemm_fragments``), and the
MFMA reads its registers in place; one in any other layout is first stored to an LDS
scratch tile by its owners, and the wave reads its operand registers from there.

Dtypes without an MFMA here (float32, mixed operands, an accumulator of another dtype)
and tiles that split into no MFMA tiles over whole waves fall back to
``lower_gemm_simt``: scalar multiply-adds per thread.

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
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.backend import MmaInstruction
from tile.ir.errors import UnsupportedOnTargetError
from tile.ir.gpu.gemm import (
    WarpTiles,
    clear_accumulator,
    constant_mnk,
    element_indices,
    fragment_accumulator,
    fragment_slots,
    lower_gemm_simt,
    mma_k_step,
    operand_registers,
    stage_fragment,
    tile_local_base,
)
from tile.ir.gpu.statements import extern_call, seq
from tile.ir.ops import Gemm, LowerContext
from tile.ir.ops.layout_rules import MfmaTiling, is_fragment_buffer, is_shared_buffer, mfma_tiling
from tile.ir.ops.region import Region, as_int
from tile.ir.ops.registry import register_lowering
from tile.ir.transform.lower_fragments import fragment_coords
from tile.layout import Fragment, SwizzledLayout, dtype_bits
from tile.layout.hardware.amd import mfma_d, mfma_operand

from .lds import element_offsets, lane_addresses, merged_read_elements

WAVE = 64
Operand = Literal["A", "B"]

MFMA_WRAPPERS: dict[tuple[str, int, int, int, str, str], str] = {
    # The f16/bf16 MFMAs have one builtin (and one register layout) on CDNA2 and CDNA3.
    **{
        (family, t, t, k, dtype, "float32"): f"tile_mfma_f32_{t}x{t}x{k}_{short}"
        for family in ("CDNA2", "CDNA3")
        for t, k in ((16, 16), (32, 8))
        for dtype, short in (("float16", "f16"), ("bfloat16", "bf16"))
    },
    ("CDNA2", 16, 16, 16, "int8", "int32"): "tile_mfma_i32_16x16x16_i8",
    ("CDNA2", 32, 32, 8, "int8", "int32"): "tile_mfma_i32_32x32x8_i8",
    ("CDNA3", 16, 16, 32, "int8", "int32"): "tile_mfma_i32_16x16x32_i8",
    ("CDNA3", 32, 32, 16, "int8", "int32"): "tile_mfma_i32_32x32x16_i8",
}
"""``(family, m, n, k, operand dtype, accumulator dtype) -> tile_hip.h wrapper``.

Keyed by family: the int8 MFMAs differ between CDNA2 and CDNA3 (the gfx90a builtins do
not exist on gfx942 and the reverse).
"""


def mfma_instructions(family: str, available: Sequence[MmaInstruction]) -> tuple[MmaInstruction, ...]:
    """The ``available`` MFMAs (an arch's list) that this lowering has a wrapper for."""
    return tuple(
        i for i in available if (family, i.m, i.n, i.k, i.input_dtype, i.accumulator_dtype) in MFMA_WRAPPERS
    )


def _wrapper(family: str, instr: MmaInstruction) -> str:
    key = (family, instr.m, instr.n, instr.k, instr.input_dtype, instr.accumulator_dtype)
    return MFMA_WRAPPERS[key]


CK_WRAPPERS = frozenset(
    {
        *(f"tile_mfma_f32_{s}_{d}" for s in ("16x16x16", "32x32x8") for d in ("f16", "bf16")),
        "tile_mfma_i32_16x16x32_i8",
        "tile_mfma_i32_32x32x16_i8",
    }
)
"""The MFMA wrappers ``T.gemm(impl="ck")`` can hand to composable_kernel's warp gemm
(``tile_hip/ck.h``): CK's f16/bf16 forms, and int8 on CDNA3 only (CK computes CDNA2 int8
with f32 MFMAs)."""


def ck_wrapper(op: Any, ctx: LowerContext, wrapper: str) -> str:
    """``tile_ck_*``: the CK warp-gemm counterpart of tile's MFMA ``wrapper`` (same registers)."""
    if wrapper not in CK_WRAPPERS:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.gemm(impl='ck'): composable_kernel has no warp gemm here for {wrapper} ({op.a.dtype})",
            hint="use float16/bfloat16 operands (int8 needs gfx942), or drop impl='ck'",
        )
    return "tile_ck_" + wrapper.removeprefix("tile_")


def _flat_index(buffer: Any, indices: Sequence[Any]) -> Any:
    """Row-major element offset of ``indices`` in ``buffer`` (a ``tvm_access_ptr`` offset)."""
    out: Any = tirx.const(0, "int32")
    for index, dim in zip(indices, buffer.shape, strict=True):
        out = out * dim + index
    return out


def family_of(ctx: LowerContext) -> str:
    """``CDNA2`` / ``CDNA3``: the family of the target's gfx processor."""
    from ..arch import capabilities as arch_capabilities
    from .backend import arch_of

    return arch_capabilities(arch_of(ctx.target)).family


@dataclasses.dataclass
class _Plan(WarpTiles):
    op: Gemm
    m: int
    n: int
    k: int
    tiling: MfmaTiling
    tx: Any

    lanes = WAVE

    def __post_init__(self) -> None:
        self.warps_m, self.warps_n = self.tiling.waves_m, self.tiling.waves_n

    @property
    def tile(self) -> int:
        """M = N of one MFMA (16 or 32)."""
        return self.tiling.tile

    @property
    def tile_k(self) -> int:
        """K of one MFMA."""
        return self.tiling.instruction.k

    @property
    def per_lane(self) -> int:
        """A (or B) elements one lane holds per MFMA."""
        return self.tile * self.tile_k // WAVE

    def operand_fragment(self, which: Operand) -> Fragment:
        return mfma_operand(which, self.tile, self.tile_k)


def operand_element(plan: _Plan, which: Operand, lane: Any, v: int) -> tuple[Any, Any]:
    """``(mn, k)`` of operand element ``v`` of ``lane`` in one A or B tile of the plan's MFMA.

    From tile-layout's MFMA operand fragments (their inverse), so the gemm and the
    accumulator layout come from one place; the emulator checks them independently.
    """
    base = plan.operand_fragment(which)
    coords, _ = fragment_coords(base, lane, tirx.const(v, "int32"))
    return (coords[0], coords[1]) if which == "A" else (coords[1], coords[0])


def _register_operand(
    plan: _Plan, which: Operand, region: Region, transposed: bool, ctx: LowerContext
) -> Callable[[Any, int], Any] | None:
    """``pointer(kk, tile)`` to a register operand's own elements, if it is in MFMA operand order.

    That is the layout ``infer_layout`` gives a register A/B operand (tile-layout's
    ``mfma_operand`` per wave, replicated over the other wave dimension): every lane of
    every wave must hold its ``per_lane`` elements of each (k-step, tile) at the same
    consecutive locals. ``None``: some other layout (then the operand goes through LDS).
    """
    frag = ctx.layouts.get(region.name)
    if not isinstance(frag, Fragment) or transposed or len(region.extents) != 2:
        return None
    slots = fragment_slots(frag, all_replicas=True)
    base = plan.operand_fragment(which)
    t, tk = plan.tile, plan.tile_k
    count = plan.warp_m // t if which == "A" else plan.warp_n // t
    for wave in range(plan.warps_m * plan.warps_n):
        r0, c0 = plan.warp_origin(wave)
        for kk in range(plan.k // tk):
            for tile in range(count):
                origin = (r0 + tile * t, kk * tk) if which == "A" else (kk * tk, c0 + tile * t)
                if tile_local_base(slots, base, origin, wave * WAVE) is None:
                    return None
    mn_first, k_first = operand_element(plan, which, plan.lane, 0)

    def pointer(kk: Any, tile: int) -> Any:
        if which == "A":
            row, col = plan.row0 + tile * t + mn_first, kk * tk + k_first
        else:
            row, col = kk * tk + k_first, plan.col0 + tile * t + mn_first
        return tirx.address_of(tirx.BufferLoad(region.buffer, element_indices(region, row, col)))

    return pointer


def _lds_offsets(
    region: Region, ctx: LowerContext
) -> tuple[dict[tuple[int, ...], int], tuple[int, int]] | None:
    """Physical element offsets of ``region``'s 2-D tile in LDS and the tile's logical origin.

    Only for a shared buffer whose inferred layout is an XOR swizzle that
    ``apply_shared_layouts`` applies (the layout's shape is the buffer's trailing dims):
    that pass pads every dynamic shared buffer to whole swizzle periods (at least 256
    bytes), so the buffer, and each copy along its leading dims, starts on a period and
    the offsets below are the byte addresses modulo 16 too. ``None`` for anything else
    (a row-major or padded tile, whose placement in LDS TVM decides with no alignment
    promise, a staged scratch tile, a region with a symbolic corner in the tile).
    """
    layout = ctx.layouts.get(region.name)
    if not isinstance(layout, SwizzledLayout) or not is_shared_buffer(region.buffer):
        return None
    logical = [int(d) for d in layout.get_input_shape()]
    shape = [as_int(d) for d in region.buffer.shape]
    if len(logical) != 2 or shape[-2:] != logical or any(e != 1 for e in map(as_int, region.extents[:-2])):
        return None
    if math.prod(int(d) for d in layout.get_output_shape()) * dtype_bits(str(region.dtype)) % (16 * 8) != 0:
        return None  # a copy along the leading dims would start off a 16-byte boundary
    corner = [as_int(lo) for lo in region.mins[-2:]]
    if corner[0] is None or corner[1] is None:
        return None
    return element_offsets(layout), (corner[0], corner[1])


def _read_elements(plan: _Plan, which: Operand, region: Region, transposed: bool, ctx: LowerContext) -> int:
    """Operand elements one LDS read of this gemm moves per lane (1: element by element).

    The widest run contiguous and aligned in the buffer's physical layout on every lane
    of every wave, for every tile and k-step the gemm reads (``lds.merged_read_elements``,
    the function the bank-conflict model counts reads with). Lanes of a ``[MN][K]``
    operand hold consecutive K elements, usually within one 16-byte chunk: 8 bytes
    (4 fp16, ``ds_read_b64``) or 4 bytes (4 int8 on CDNA2, ``ds_read_b32``); a ``[K][MN]``
    operand's elements are a row apart, so 1.
    """
    found = _lds_offsets(region, ctx)
    if found is None:
        return 1
    offsets, (r0, c0) = found
    k_last = (which == "A") != transposed
    mn_origin, k_origin = (r0, c0) if k_last else (c0, r0)
    t, tk, per_lane = plan.tile, plan.tile_k, plan.per_lane
    count, wave_extent = (plan.warp_m // t, plan.warp_m) if which == "A" else (plan.warp_n // t, plan.warp_n)
    waves = plan.warps_m if which == "A" else plan.warps_n
    elem = dtype_bits(str(region.dtype)) // 8
    if elem * 8 != dtype_bits(str(region.dtype)):
        return 1
    lanes: list[list[int]] = []
    for wave in range(waves):
        for tile in range(count):
            for kk in range(plan.k // tk):
                mn0 = mn_origin + wave * wave_extent + tile * t
                lanes += lane_addresses(offsets, elem, k_last, mn0, k_origin + kk * tk, t, per_lane)
    return merged_read_elements(lanes, elem, per_lane)


def _loader(
    plan: _Plan, which: Operand, region: Region, transposed: bool, regs: Any, run: int = 1
) -> Callable[[Any, int], list[Any]]:
    """``load(kk, tile) -> stmts``: this lane's elements of A tile / B tile ``tile`` at k-step ``kk``.

    ``run`` > 1 (``_read_elements``): one ``tile::copy_<bits>`` per ``run`` elements, a
    single LDS read (``ds_read_b64`` for 8 bytes). hipcc left most element loads from
    the swizzled tiles unmerged (``ds_read_u16`` each), so the width is not left to it.
    """
    mn0 = plan.row0 if which == "A" else plan.col0
    # Storage is [MN][K] for A untransposed and B transposed, [K][MN] otherwise.
    k_last = (which == "A") != transposed
    per_lane = plan.per_lane
    bits = run * dtype_bits(str(region.dtype))

    def load(kk: Any, tile: int) -> list[Any]:
        out = []
        for v in range(0, per_lane, run):
            mn, k = operand_element(plan, which, plan.lane, v)
            mn = mn0 + tile * plan.tile + mn
            k = kk * plan.tile_k + k
            index = element_indices(region, mn, k) if k_last else element_indices(region, k, mn)
            slot = tile * per_lane + v
            if run == 1:
                out.append(tirx.BufferStore(regs, tirx.BufferLoad(region.buffer, index), [slot]))
            else:
                # tvm_access_ptr (not address_of) so that TVM's barrier insertion sees the
                # shared read and keeps the copy after the barrier that follows the stores.
                src = region.buffer.access_ptr("r", offset=_flat_index(region.buffer, index), extent=run)
                dst = regs.access_ptr("w", offset=slot, extent=run)
                out.append(extern_call(f"tile::copy_{bits}", dst, src))
        return out

    return load


def lower_gemm_mfma(op: Any, ctx: LowerContext) -> Any:
    """``T.gemm`` with MFMAs (see module docstring)."""
    assert isinstance(op, Gemm)
    where = "T.gemm on CDNA matrix cores"
    m, n, k = constant_mnk(op, ctx, where)
    threads, tx, c_frag = fragment_accumulator(op, ctx, where)
    policy = int(getattr(op, "policy", 0))
    tiling = mfma_tiling(m, n, k, threads, ctx.capabilities, str(op.a.dtype), policy)
    if (
        tiling is None
        or str(op.b.dtype) != str(op.a.dtype)
        or str(op.c.dtype) != tiling.instruction.accumulator_dtype
    ):
        if op.impl == "ck":
            raise ctx.error(
                UnsupportedOnTargetError,
                f"T.gemm(impl='ck') of {op.a.dtype} x {op.b.dtype} -> {op.c.dtype} on {m}x{n}x{k} over "
                f"{threads} threads has no MFMA tiling for composable_kernel's warp gemm",
                hint="use float16/bfloat16 -> float32 (or int8 -> int32 on gfx942) with tiles that split "
                "into 16x16 or 32x32 MFMA tiles over whole waves, or drop impl='ck'",
            )
        # No MFMA for these dtypes (float32, mixed operands, another accumulator), or the
        # tile does not split into MFMA tiles over whole waves: every thread computes its
        # own accumulator elements.
        return lower_gemm_simt(op, ctx, c_frag, k)
    wrapper = _wrapper(family_of(ctx), tiling.instruction)
    if op.impl == "ck":
        wrapper = ck_wrapper(op, ctx, wrapper)
    plan = _Plan(op, m, n, k, tiling, tx)
    t = plan.tile
    mt, nt = plan.warp_m // t, plan.warp_n // t

    # The accumulator must hold each MFMA tile's registers consecutively in MFMA order,
    # at the same local index on every lane of every wave.
    c_slots, c_base = fragment_slots(c_frag, all_replicas=True), mfma_d(t)
    c_locals: dict[tuple[int, int], int] = {}
    for wave in range(tiling.waves_m * tiling.waves_n):
        r0, c0 = plan.warp_origin(wave)
        for mi in range(mt):
            for ni in range(nt):
                start = tile_local_base(c_slots, c_base, (r0 + mi * t, c0 + ni * t), wave * WAVE)
                if start is None or c_locals.setdefault((mi, ni), start) != start:
                    raise ctx.error(
                        UnsupportedOnTargetError,
                        f"{where}: the accumulator {op.c.name} is not in MFMA register order ({t}x{t} tiles)",
                        hint="let T.gemm choose the accumulator layout (no T.annotate_layout on it)",
                    )

    def c_ptr(mi: int, ni: int) -> Any:
        coords = fragment_coords(c_frag, tx, tirx.const(c_locals[(mi, ni)], "int32"))[0]
        return tirx.address_of(tirx.BufferLoad(op.c.buffer, element_indices(op.c, coords[0], coords[1])))

    stmts: list[Any] = []
    if op.clear_accum:
        stmts.append(clear_accumulator(op, c_frag, tx))

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
            source, staged = stage_fragment(op, region, ctx)
            stmts.extend(staged)
        elif not is_shared_buffer(region.buffer):
            raise ctx.error(
                UnsupportedOnTargetError,
                f"{where}: operand {which} ({region.name}) must be in shared memory or a fragment",
                hint="T.copy it into a T.alloc_shared buffer first",
            )
        regs, pointers[which] = operand_registers(region, which, count, plan.per_lane, op.a.dtype)
        stmts.append(tirx.AllocBuffer(regs))
        run = _read_elements(plan, which, source, transposed, ctx)
        loaders[which] = _loader(plan, which, source, transposed, regs, run)

    kk = tirx.Var("kk", "int32")
    step = mma_k_step(kk, loaders, pointers, (mt, nt), wrapper, c_ptr)
    stmts.append(tirx.For(kk, 0, k // plan.tile_k, tirx.ForKind.UNROLLED, step))
    return seq(stmts)


register_lowering(Gemm, target="hip")(lower_gemm_mfma)
