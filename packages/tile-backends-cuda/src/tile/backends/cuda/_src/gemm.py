"""``T.gemm`` on tensor cores with ``mma.sync`` (sm_80+): ldmatrix operand loads, per-warp tiles.

The block's warps split the ``M x N`` accumulator as ``infer_layout`` did
(``layout_rules.warp_partition`` under the gemm's ``GemmWarpPolicy``; warp
``wm * warps_n + wn`` owns sub-tile ``(wm, wn)``). An accumulator in the wgmma layout
(sm_90a's warpgroup split, ``layout_rules.warpgroup_fragment``: warp ``w`` of a warpgroup
holds rows ``16 w .. 16 w + 15`` of each 64-row band) keeps that order: each warp's m16
tiles are 64 rows apart. So a gemm sm_90a runs on mma.sync (a tf32 gemm whose operands
are not K-major) shares its accumulator layout with the wgmma gemms of the same kernel.
Each warp walks K in steps of the instruction's k: it loads its A tiles (16 x k) and B
tiles (k x 8) from shared memory into small register arrays with ``ldmatrix`` (or, where ldmatrix cannot
produce the fragment, element by element through the fragment's inverse map), then
issues one ``mma.sync`` per (m16, n8) tile into the accumulator fragment.

Registers are always in the PTX fragment element order, which is the local order of
``tile.layout.hardware.mma_fragment`` and what the ``tile_mma_*`` wrappers of
``tile_cuda/mma.h`` take. The accumulator (and fragment A/B operands) are addressed
in block coordinates: ``C[coords]`` with ``coords`` the element that thread ``tx``
holds at local ``l`` (the inverse of ``C``'s inferred Fragment), which
``lower_fragments`` rewrites to ``C_local[l]``. Shared operands are addressed in
their logical coordinates as well; a 16-byte ldmatrix row never straddles a swizzle
chunk, so whatever pass applies the shared layout maps each row address as a whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.errors import UnsupportedOnTargetError
from tile.ir.gpu.gemm import WarpTiles, constant_mnk, mma_k_step, operand_registers
from tile.ir.gpu.gemm import clear_accumulator as clear_accumulator
from tile.ir.gpu.gemm import element_indices as _at
from tile.ir.gpu.gemm import fragment_accumulator as fragment_accumulator
from tile.ir.gpu.gemm import fragment_inverse as fragment_inverse
from tile.ir.gpu.gemm import fragment_slots as _slots
from tile.ir.gpu.gemm import lower_gemm_simt as lower_gemm_simt
from tile.ir.gpu.gemm import tile_local_base as tile_local_base
from tile.ir.gpu.gemm import unrolled as _unrolled
from tile.ir.gpu.statements import extern_call as _call
from tile.ir.gpu.statements import seq as _seq
from tile.ir.ops import Gemm, LowerContext
from tile.ir.ops.layout_rules import (
    has_warpgroup_form,
    is_fragment_buffer,
    is_shared_buffer,
    same_fragment,
    warp_partition,
    warpgroup_fragment,
    warpgroup_partition,
)
from tile.ir.ops.region import Region
from tile.ir.ops.registry import register_lowering
from tile.ir.target import Target
from tile.layout import Fragment
from tile.layout.hardware import mma_fragment

from ..arch import capabilities, parse_arch
from ..errors import CudaArchError

WARP = 32
Operand = Literal["A", "B"]


@dataclasses.dataclass(frozen=True)
class MmaKind:
    """One ``tile_mma_*`` wrapper: its shape and per-lane fragment sizes (elements)."""

    wrapper: str
    k: int
    in_dtype: str
    acc_dtype: str
    min_arch: tuple[int, int] = (8, 0)

    @property
    def elem_bits(self) -> int:
        return {32: 8, 8: 32, 4: 64}.get(self.k, 16)

    @property
    def a_elems(self) -> int:
        return 16 * self.k // WARP

    @property
    def b_elems(self) -> int:
        return 8 * self.k // WARP

    @property
    def chunk(self) -> int:
        """Elements in one 16-byte ldmatrix row."""
        return 128 // self.elem_bits


MMA_KINDS: tuple[MmaKind, ...] = (
    # on sm_75 the header issues the f16 forms as two m16n8k8 and the int8 ones as four m8n8k16
    MmaKind("tile_mma_m16n8k16_f16_f32", 16, "float16", "float32", (7, 5)),
    MmaKind("tile_mma_m16n8k16_f16_f16", 16, "float16", "float16", (7, 5)),
    MmaKind("tile_mma_m16n8k16_bf16_f32", 16, "bfloat16", "float32"),
    MmaKind("tile_mma_m16n8k32_s8_s32", 32, "int8", "int32", (7, 5)),
    MmaKind("tile_mma_m16n8k32_u8_s32", 32, "uint8", "int32", (7, 5)),
    MmaKind("tile_mma_m16n8k8_tf32_f32", 8, "float32", "float32"),
    MmaKind("tile_mma_m16n8k32_e4m3_f32", 32, "float8_e4m3fn", "float32", (8, 9)),
    MmaKind("tile_mma_m16n8k32_e5m2_f32", 32, "float8_e5m2", "float32", (8, 9)),
    # two m8n8k4 f64 (DMMA) stacked into the m16n8 accumulator: the same C registers as the others
    MmaKind("tile_mma_m16n8k4_f64", 4, "float64", "float64"),
)


FMA_ON_OLDER_ARCHS = frozenset({"bfloat16", "float32", "float64"})
"""Operand types whose ``T.gemm`` runs on FMA where the arch has no mma for them (sm_75)."""


def mma_kind(in_dtype: str, acc_dtype: str) -> MmaKind | None:
    """The wrapper for ``in_dtype`` operands accumulating in ``acc_dtype`` (``None``: none)."""
    return next((k for k in MMA_KINDS if k.in_dtype == in_dtype and k.acc_dtype == acc_dtype), None)


# --------------------------------------------------------------------------- ldmatrix addressing
@dataclasses.dataclass(frozen=True)
class LdmatrixPlan:
    """How one lane addresses an ldmatrix that fills operand registers.

    ``row(lane)`` is ``(r, c)``: the lane's 16-byte row start, relative to the
    operand tile's origin in *storage* coordinates (the buffer's own dims).
    """

    num: int
    trans: bool
    row: Callable[[Any], tuple[Any, Any]]

    @property
    def wrapper(self) -> str:
        return f"tile_ldmatrix_x{self.num}" + ("_trans" if self.trans else "")


def ldmatrix_plan(operand: str, k_contiguous: bool, kind: MmaKind, tiles: int = 1) -> LdmatrixPlan | None:
    """The ldmatrix that loads ``tiles`` operand tiles (A: one 16 x k; B: one or two k x 8).

    ``k_contiguous``: the operand is stored with K as its last dim (A as [M][K], B as
    [N][K]); otherwise MN-contiguous (A as [K][M], B as [K][N]), which needs
    ``.trans`` and so only works for 16-bit elements. ``None``: no ldmatrix fits.
    Formulas: PTX "ldmatrix" lane-to-row map composed with the mma fragments
    (gpu-isa-facts section 3); every dtype reads one 16-byte row of ``chunk`` elements.
    """
    chunk = kind.chunk
    if kind.elem_bits > 32:
        return None  # ldmatrix moves 32-bit words: a double would be split over two lanes
    if not k_contiguous and kind.elem_bits != 16:
        return None
    if operand == "A":
        if k_contiguous:
            return LdmatrixPlan(4, False, lambda lane: (lane % 16, chunk * (lane // 16)))
        return LdmatrixPlan(4, True, lambda lane: (8 * (lane // 16) + lane % 8, 8 * ((lane % 16) // 8)))
    if tiles == 2:
        if k_contiguous:
            return LdmatrixPlan(
                4, False, lambda lane: (8 * (lane // 16) + lane % 8, chunk * ((lane % 16) // 8))
            )
        return LdmatrixPlan(4, True, lambda lane: (lane % 16, 8 * (lane // 16)))
    if k_contiguous:
        return LdmatrixPlan(2, False, lambda lane: (lane % 8, chunk * ((lane % 16) // 8)))
    return LdmatrixPlan(2, True, lambda lane: (lane % 16, 0))


# --------------------------------------------------------------------------- lowering
def _ptr(buffer: Any, indices: Sequence[Any]) -> Any:
    """``&buffer[indices]`` for fragments: ``lower_fragments`` maps the element to its register."""
    return tirx.address_of(tirx.BufferLoad(buffer, list(indices)))


def _span(buffer: Any, indices: Sequence[Any], extent: int, access: str) -> Any:
    """A pointer to ``extent`` elements from ``buffer[indices]`` (row-major) that says what it touches.

    ``tvm_access_ptr`` carries the extent and read/write mask, so TVM's shared-memory
    barrier insertion sees ldmatrix reads and its buffer compaction keeps every
    register an ldmatrix or mma writes (a bare ``&regs[i]`` looks like one element).
    """
    offset: Any = tirx.const(0, "int32")
    for index, dim in zip(indices, buffer.shape, strict=True):
        offset = offset * dim + index
    return buffer.access_ptr(access, offset=offset, extent=extent)


@dataclasses.dataclass
class _Plan(WarpTiles):
    op: Gemm
    kind: MmaKind
    m: int
    n: int
    k: int
    warps_m: int
    warps_n: int
    tx: Any
    warpgroup_order: bool = False
    """The wgmma accumulator's warp order: ``warps_m`` counts 4 warps per warpgroup row band,
    warp ``w`` of warpgroup ``g`` holds rows ``16 (w % 4) + 64 i`` of the group's part and
    the group's whole column part (``warps_n`` warpgroups split N)."""

    lanes = WARP

    @property
    def m_stride(self) -> int:
        """Rows between a warp's consecutive m16 tiles."""
        return 64 if self.warpgroup_order else 16

    @property
    def row0(self) -> Any:
        if not self.warpgroup_order:
            return super().row0
        warp = tirx.floordiv(self.tx, WARP)
        group = tirx.floordiv(warp, 4)
        return tirx.floordiv(group, self.warps_n) * (self.warp_m * 4) + tirx.floormod(warp, 4) * 16

    @property
    def col0(self) -> Any:
        if not self.warpgroup_order:
            return super().col0
        group = tirx.floordiv(tirx.floordiv(self.tx, WARP), 4)
        return tirx.floormod(group, self.warps_n) * self.warp_n

    def tile_origin(self, which: Operand) -> tuple[Any, int]:
        """``(first row or column of this thread's warp, the step between its tiles)``."""
        return (self.row0, self.m_stride) if which == "A" else (self.col0, 8)


def _tile_start(
    ctx: LowerContext, slots: Any, base: Any, origin: tuple[int, int], problem: str, whose: str
) -> int:
    """The local index at which a fragment's registers hold the mma tile at ``origin``; where they
    do not hold it in mma register order, the error ``problem`` (``whose`` layout to leave alone)."""
    start = tile_local_base(slots, base, origin, 0)
    if start is None:
        hint = f"let T.gemm choose {whose} layout (no T.annotate_layout on it)"
        raise ctx.error(UnsupportedOnTargetError, problem, hint=hint)
    return int(start)


def _operand_loader(
    plan: _Plan, which: Operand, ctx: LowerContext, regs: Any
) -> Callable[[Any, int], list[Any]]:
    """``load(kk, tile) -> stmts`` filling ``regs`` for instruction tile ``tile`` at k-step ``kk``.

    A tiles are 16 rows each; B tiles 8 columns each (B loads cover two tiles when the
    tile count is even, so only even tiles emit code then).
    """
    op, kind = plan.op, plan.kind
    region = op.a if which == "A" else op.b
    transposed = op.transpose_a if which == "A" else op.transpose_b
    per_tile = kind.a_elems if which == "A" else kind.b_elems
    # Storage is [MN][K] (K contiguous) for A untransposed and B transposed.
    k_contiguous = (which == "A") != transposed
    count = plan.warp_m // 16 if which == "A" else plan.warp_n // 8
    pair = which == "B" and count % 2 == 0
    ldm = ldmatrix_plan(which, k_contiguous, kind, 2 if pair else 1)
    mn0, step = plan.tile_origin(which)

    def storage(mn: Any, kk: Any) -> list[Any]:
        return _at(region, kk, mn) if not k_contiguous else _at(region, mn, kk)

    if ldm is not None and is_shared_buffer(region.buffer):

        def load(kk: Any, tile: int) -> list[Any]:
            if pair and tile % 2:
                return []
            r, c = ldm.row(plan.lane)
            mn_off, k_off = (r, c) if k_contiguous else (c, r)
            mn = mn0 + tile * step + mn_off
            kidx = kk * kind.k + k_off
            dst = regs.access_ptr("w", offset=tile * per_tile, extent=per_tile * (2 if pair else 1))
            src = _span(region.buffer, storage(mn, kidx), kind.chunk, "r")
            return [_call(ldm.wrapper, dst, src)]

        return load

    base = mma_fragment(which, kind.in_dtype)  # (m, k) for A, (k, n) for B

    def load_scalar(kk: Any, tile: int) -> list[Any]:
        out = []
        for i in range(per_tile):
            coord = fragment_inverse(base, plan.lane, tirx.const(i, "int32"))
            mn_in, k_in = (coord[0], coord[1]) if which == "A" else (coord[1], coord[0])
            value = tirx.BufferLoad(region.buffer, storage(mn0 + tile * step + mn_in, kk * kind.k + k_in))
            out.append(tirx.BufferStore(regs, value, [tile * per_tile + i]))
        return out

    return load_scalar


def lower_gemm_mma(op: Any, ctx: LowerContext) -> Any:
    """``T.gemm`` with mma.sync (see module docstring)."""
    assert isinstance(op, Gemm)
    if op.impl == "cute":
        from .cute import lower_gemm_cute  # imports this module

        return lower_gemm_cute(op, ctx)
    where = "T.gemm on CUDA tensor cores"
    m, n, k = constant_mnk(op, ctx, where)
    kind = mma_kind(op.a.dtype, op.c.dtype)
    if kind is None:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where}: no mma.sync for {op.a.dtype} operands into a {op.c.dtype} accumulator",
            hint="use float16/bfloat16 -> float32 (or float16), int8/uint8 -> int32, "
            "float32 (tf32) -> float32, float64 -> float64",
        )
    arch = parse_arch(ctx.target.arch) if ctx.target.arch else None
    threads, tx, c_frag = fragment_accumulator(op, ctx, where)
    if arch is not None and arch.compute_capability < kind.min_arch and kind.in_dtype in FMA_ON_OLDER_ARCHS:
        # Turing has no bfloat16, tf32 or float64 tensor-core instruction: the product is
        # computed on the FMA units instead (right, slower), as TileLang does there
        return lower_gemm_simt(op, ctx, c_frag, k)
    if arch is not None and arch.compute_capability < kind.min_arch:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where}: {kind.in_dtype} mma needs sm_{kind.min_arch[0]}{kind.min_arch[1]}+, target is {arch}",
            hint="target sm_89 or newer, or cast the operands to float16/bfloat16",
        )
    grouped = _warpgroup_split(op, ctx, c_frag, m, n, threads)
    if grouped is not None:
        warps_m, warps_n = 4 * grouped[0], grouped[1]
    else:
        warps_m, warps_n = warp_partition(m, n, threads // WARP, 16, 8, op.policy)
    if warps_m == 0 or k % kind.k or threads % WARP:
        # No m16n8k tiling over whole warps (a 16x16 tile on 4 warps, K = 7): every thread
        # computes the accumulator elements it holds, from shared memory
        return lower_gemm_simt(op, ctx, c_frag, k)
    for region, transposed in ((op.a, op.transpose_a), (op.b, op.transpose_b)):
        if is_fragment_buffer(region.buffer) and (
            transposed or not isinstance(ctx.layouts.get(region.name), Fragment)
        ):
            # a register operand the mma cannot read in place (transposed): per-thread
            # products, the operand staged through shared memory
            return lower_gemm_simt(op, ctx, c_frag, k)
    plan = _Plan(op, kind, m, n, k, warps_m, warps_n, tx, grouped is not None)
    mt, nt = plan.warp_m // 16, plan.warp_n // 8

    c_slots = _slots(c_frag)
    c_base = mma_fragment("C")
    c_locals: dict[tuple[int, int], int] = {}
    for mi in range(mt):
        for ni in range(nt):
            problem = f"{where}: the accumulator {op.c.name} does not hold m16n8 tiles in mma register order"
            c_locals[(mi, ni)] = _tile_start(
                ctx, c_slots, c_base, (mi * plan.m_stride, ni * 8), problem, "the accumulator"
            )

    def c_ptr(mi: int, ni: int) -> Any:
        coords = fragment_inverse(c_frag, tx, tirx.const(c_locals[(mi, ni)], "int32"))
        return _ptr(op.c.buffer, _at(op.c, coords[0], coords[1]))

    stmts: list[Any] = []
    if op.clear_accum:
        stmts.append(clear_accumulator(op, c_frag, tx))

    operand_regs: list[Any] = []
    pointers: dict[str, Callable[[Any, int], Any]] = {}
    loaders: dict[str, Callable[[Any, int], list[Any]]] = {}
    operands: tuple[tuple[Operand, Region], ...] = (("A", op.a), ("B", op.b))
    for which, region in operands:
        per_tile = kind.a_elems if which == "A" else kind.b_elems
        count = mt if which == "A" else nt
        if is_fragment_buffer(region.buffer):
            pointers[which] = _fragment_operand(plan, which, region, ctx)
            continue
        regs, pointers[which] = operand_registers(region, which, count, per_tile, kind.in_dtype)
        operand_regs.append(regs)
        loaders[which] = _operand_loader(plan, which, ctx, regs)

    def k_step(kk: Any) -> Any:
        return mma_k_step(kk, loaders, pointers, (mt, nt), kind.wrapper, c_ptr)

    stmts.extend(tirx.AllocBuffer(r) for r in operand_regs)
    stmts.append(_unrolled("kk", k // kind.k, k_step))
    return _seq(stmts)


def _warpgroup_split(
    op: Gemm, ctx: LowerContext, c_frag: Fragment, m: int, n: int, threads: int
) -> tuple[int, int] | None:
    """``(wg_m, wg_n)`` when the accumulator is in the wgmma layout of whole warpgroups, else
    ``None``. Only gemms whose dtypes have a warpgroup form get that layout (``gemm_fragments``)."""
    if threads % 128 or not has_warpgroup_form(ctx.capabilities, op.a.dtype, op.c.dtype):
        return None
    expected = warpgroup_fragment(m, n, threads, 256, int(op.policy))
    if expected is None or not same_fragment(c_frag, expected):
        return None
    wg_m, wg_n = warpgroup_partition(m, n, threads // 128, int(op.policy))
    return (wg_m, wg_n) if wg_m else None


def _fragment_operand(
    plan: _Plan, which: Operand, region: Region, ctx: LowerContext
) -> Callable[[Any, int], Any]:
    """Pointer maker for a fragment A/B operand (rs / sr / rr): its registers, in place."""
    frag = ctx.layouts.get(region.name)
    transposed = plan.op.transpose_a if which == "A" else plan.op.transpose_b
    if not isinstance(frag, Fragment) or transposed:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.gemm fragment operand {which} ({region.name}) must be untransposed with an inferred layout",
            hint="copy a transposed register operand into shared memory first",
        )
    kind, slots = plan.kind, _slots(frag)
    base = mma_fragment(which, kind.in_dtype)
    count = plan.warp_m // 16 if which == "A" else plan.warp_n // 8
    starts: dict[tuple[int, int], int] = {}
    for kk in range(plan.k // kind.k):
        for tile in range(count):
            origin = (tile * plan.m_stride, kk * kind.k) if which == "A" else (kk * kind.k, tile * 8)
            problem = f"T.gemm fragment operand {region.name} is not in mma {which}-register order"
            starts[(kk, tile)] = _tile_start(ctx, slots, base, origin, problem, "the operand's")

    first = fragment_inverse(base, plan.lane, tirx.const(0, "int32"))  # element 0 of this lane

    def pointer(kk: Any, tile: int) -> Any:
        # Element 0 of this lane's registers for (k-step, tile), in block coordinates;
        # lower_fragments maps it to the (checked contiguous) local start.
        mn0, step = plan.tile_origin(which)
        if which == "A":
            row, col = mn0 + tile * step + first[0], kk * kind.k + first[1]
        else:
            row, col = kk * kind.k + first[0], mn0 + tile * step + first[1]
        return _ptr(region.buffer, _at(region, row, col))

    _check_affine(starts, count, ctx, region.name)
    return pointer


def _check_affine(starts: dict[tuple[int, int], int], count: int, ctx: LowerContext, name: str) -> None:
    steps = sorted({kk for kk, _ in starts})
    for tile in range(count):
        if len(steps) > 2:
            stride = starts[(1, tile)] - starts[(0, tile)]
            if any(starts[(s, tile)] != starts[(0, tile)] + s * stride for s in steps):
                raise ctx.error(
                    UnsupportedOnTargetError,
                    f"T.gemm fragment operand {name}: its k-steps are not evenly spaced in registers",
                    hint="let T.gemm choose the operand's layout",
                )


def mma_sync_available(target: Target) -> bool:
    """The ``when`` of the rule: a CUDA arch tile knows, with mma.sync (sm_80+)."""
    if target.arch is None:
        return True
    try:
        return bool(capabilities(target.arch).mma)
    except CudaArchError:
        return False


register_lowering(Gemm, target="cuda", when=mma_sync_available)(lower_gemm_mma)
