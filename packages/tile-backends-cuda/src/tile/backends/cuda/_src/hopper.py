"""sm_90a: ``T.gemm`` on ``wgmma.mma_async`` and swizzled shared tiles.

``T.gemm`` with B in shared memory and A in shared memory (``ss``) or in a fragment
holding each instruction's A tile in wgmma register order (``rs``; e.g. a softmax
result cast from a wgmma accumulator), 16-bit inputs and f32 accumulators,
and the warpgroup accumulator ``infer_layout`` chose (``layout_rules.warpgroup_fragment``:
the backend lists ``(64, 256, 16)`` first among sm_90a's mma shapes) becomes, per
warpgroup, ``m64nNk16`` instructions reading A and B through 64-bit matrix
descriptors (``tile_wgmma_desc``), between ``tile_wgmma_fence`` and
``tile_wgmma_commit`` + ``tile_wgmma_wait<0>``. fp8 (e4m3, e5m2) operands take ``m64nNk32``
instructions, ``ss`` only and K-major only (PTX has no transposed 8-bit wgmma): an A stored
(K, M) or a B stored (K, N) is a typed error at the gemm's line that says how to store it.
float32 operands take tf32 ``m64nNk8`` instructions (``ss`` or ``rs``, K-major only); a
float32 gemm whose A is stored (K, M) or whose B is stored (K, N) runs on mma.sync's tf32
instruction with the warpgroup accumulator layout (the mma.sync rule keeps its warp order),
so its accumulator and a wgmma gemm's can meet in one ``T.Parallel``.
Any other gemm keeps the mma.sync rule.

Descriptors describe the operands as their swizzled layouts store them (the layouts
``make_swizzled_layout`` picks are the canonical wgmma/TMA ones): a K-contiguous
operand is K-major (each MN row one swizzle row, SBO = 8 rows), an MN-contiguous one
MN-major (each K row one swizzle row; LBO = the next block of ``span`` MN elements,
SBO = 8 K rows). Pass ``apply_shared_layouts`` (:mod:`tile.ir.gpu.shared_layouts`, run
on every GPU target) makes every other access of those buffers agree.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.errors import UnsupportedOnTargetError
from tile.ir.gpu.shared_layouts import APPLY_SHARED_LAYOUTS, apply_shared_layouts
from tile.ir.ops import Gemm, LowerContext
from tile.ir.ops.layout_rules import (
    has_warpgroup_form,
    is_fragment_buffer,
    is_shared_buffer,
    region_is_whole,
    same_fragment,
    warpgroup_fragment,
    warpgroup_partition,
)
from tile.ir.ops.region import Region, as_int
from tile.ir.ops.registry import register_lowering
from tile.ir.target import Target
from tile.ir.transform.lower_fragments import fragment_replica_coords
from tile.layout import Fragment, SwizzledLayout, dtype_bits
from tile.layout.hardware import wgmma_a

from ..arch import capabilities, parse_arch
from ..errors import CudaArchError
from .gemm import (
    _at,
    _call,
    _ptr,
    _slots,
    clear_accumulator,
    fragment_inverse,
    lower_gemm_mma,
    tile_local_base,
)

WARPGROUP = 128
WGMMA_N = (256, 192, 128, 96, 64, 32, 16, 8)
"""The N of the ``tile_wgmma_m64nNk16`` / ``m64nNk32`` wrappers in ``tile_cuda/hopper.h``."""


@dataclasses.dataclass(frozen=True)
class WgmmaForm:
    """The wgmma of one operand dtype (f32 accumulators): the wrappers' type name, the K of one
    instruction (32 bytes of K), whether shared operands may be MN-major (PTX: imm-trans
    exists for .f16/.bf16 only; 8-bit and tf32 operands are read K-major), whether A may
    come from registers (a ``_rs`` wrapper), and whether a gemm wgmma cannot take runs on
    mma.sync in the warpgroup layout (tf32, which TileLang also keeps on mma.sync then;
    otherwise such a gemm is a typed error that says how to store its operands)."""

    name: str
    k: int
    mn_major: bool
    register_a: bool = True
    k_major_only: bool = False


WGMMA_FORMS = {
    "float16": WgmmaForm("f16", 16, True),
    "bfloat16": WgmmaForm("bf16", 16, True),
    "float8_e4m3fn": WgmmaForm("e4m3", 32, False, register_a=False),
    "float8_e5m2": WgmmaForm("e5m2", 32, False, register_a=False),
    # float32 operands multiply as tf32 (Capabilities.float32_gemm), as on mma.sync
    "float32": WgmmaForm("tf32", 8, False, k_major_only=True),
}
"""The operand dtypes this rule lowers; ``Capabilities.mma_instructions`` lists them, so gemms of
other dtypes take the mma.sync layouts from the start."""
WGMMA_DTYPES = tuple(WGMMA_FORMS)


def wgmma_available(target: Target) -> bool:
    """The ``when`` of the rule: an arch with ``wgmma`` (sm_90a)."""
    if target.arch is None:
        return False
    try:
        return bool(capabilities(parse_arch(target.arch).name).wgmma)
    except CudaArchError:
        return False


# --------------------------------------------------------------------------- descriptors
@dataclasses.dataclass(frozen=True)
class OperandDesc:
    """How one wgmma operand tile is described (byte offsets and swizzle)."""

    k_major: bool
    swizzle_bytes: int
    lbo_bytes: int
    sbo_bytes: int

    @property
    def trans(self) -> int:
        """``imm-trans``: 1 reads the operand MN-major."""
        return 0 if self.k_major else 1


def operand_desc(layout: SwizzledLayout, rows: int, k_major: bool) -> OperandDesc:
    """Descriptor fields for a tile stored under ``layout`` (``rows`` = its row count).

    K-major: rows are MN, a row is one swizzle row; 8-row groups ``8 * span`` bytes
    apart (SBO); LBO unused (PTX: assumed 1). MN-major: rows are K; the next
    ``span`` MN elements are ``rows * span`` bytes further (LBO, the next column
    block of the swizzled layout), 8-row K groups ``8 * span`` bytes apart (SBO).
    """
    span = layout.swizzle_bytes
    if k_major:
        return OperandDesc(True, span, 16, 8 * span)
    return OperandDesc(False, span, rows * span, 8 * span)


# --------------------------------------------------------------------------- the rule
def _storage(region: Region) -> tuple[int, int] | None:
    """``(rows, cols)`` of the operand's buffer as its swizzled layout stores it: the rows of
    every stage of a ``(stages, rows, cols)`` buffer lie in one column block before the next
    block of columns (an MN-major operand's LBO spans them all)."""
    shape = [as_int(e) for e in region.buffer.shape]
    if len(shape) < 2 or any(e is None for e in shape):
        return None
    return math.prod(shape[:-1]), int(shape[-1])  # type: ignore[arg-type]


def _described_part(region: Region, layout: SwizzledLayout, analyzer: Any) -> bool:
    """Whether descriptors can address ``region``: one matrix of its buffer (one index of the
    leading dims, a stage ``A_shared[ko % 2, :, :]``) whose rows start on an 8-row core
    matrix and whose columns start on a swizzle span (``Q_shared[:, 256:]``, or
    ``Q_shared[:, j * 64 : (j + 1) * 64]`` in a loop over ``j`` for 64-element spans): the
    descriptor's start address then sits where the whole tile's would for those rows and
    columns. A start the loop makes symbolic counts when ``analyzer`` proves it aligned."""
    if len(region.extents) < 2 or any(as_int(e) != 1 for e in region.extents[:-2]):
        return False
    span_bytes = max(layout.swizzle_bytes, 16)  # unswizzled: a core matrix row of 16 bytes
    span = span_bytes * 8 // dtype_bits(str(region.buffer.dtype))
    row, col = region.mins[-2:]
    return _multiple_of(row, 8, analyzer) and _multiple_of(col, span, analyzer)


def _multiple_of(start: Any, step: int, analyzer: Any) -> bool:
    """Whether ``start`` (a constant, or an expression of loop variables) is a multiple of ``step``."""
    value = as_int(start)
    if value is not None:
        return value % step == 0
    return bool(analyzer.can_prove(tirx.floormod(start, step) == 0))


def _pieces(n: int) -> list[int]:
    out, left = [], n
    while left:
        piece = next(p for p in WGMMA_N if p <= left)
        out.append(piece)
        left -= piece
    return out


_STAGE_IN_SHARED = "stage register operands in shared memory (T.alloc_shared + T.copy)"
_LET_GEMM_CHOOSE = "let T.gemm choose the accumulator's layout (no T.annotate_layout on it)"


def _why_not(op: Gemm, ctx: LowerContext) -> tuple[str, str] | None:
    """Why this gemm cannot use wgmma and what to do about it (``None``: it can)."""
    m, n, k = (as_int(e) for e in op.mnk)
    form = WGMMA_FORMS.get(op.a.dtype)
    if form is None or op.b.dtype != op.a.dtype or op.c.dtype != "float32":
        return f"has no {op.a.dtype} x {op.b.dtype} -> {op.c.dtype} form", _STAGE_IN_SHARED
    if m is None or n is None or k is None or k % form.k:
        reason = f"needs constant M, N and K a multiple of {form.k} for {op.a.dtype}"
        return reason, f"use a K tile that is a multiple of {form.k}"
    if not form.mn_major:
        problem = _mn_major_operand(op, form)
        if problem is not None:
            return problem
    c = ctx.layouts.get(op.c.name)
    if ctx.threads is None or not isinstance(c, Fragment):
        return "needs an inferred accumulator fragment", _LET_GEMM_CHOOSE
    expected = warpgroup_fragment(m, n, ctx.threads, 256, int(op.policy))
    if expected is None or not same_fragment(c, expected):
        return "needs the warpgroup accumulator layout", _LET_GEMM_CHOOSE
    for region in (op.a, op.b):
        layout = ctx.layouts.get(region.name)
        if region is op.a and is_fragment_buffer(region.buffer):
            if op.transpose_a or not region_is_whole(region) or not isinstance(layout, Fragment):
                reason = f"reads {region.name} from registers only untransposed with an inferred layout"
                return reason, _STAGE_IN_SHARED
            if register_a_starts(op, layout, ctx.threads) is None:
                return f"needs {region.name}'s registers in wgmma A order", _STAGE_IN_SHARED
            continue
        if not is_shared_buffer(region.buffer):
            return f"reads {region.name} from registers (only A may be a fragment)", _STAGE_IN_SHARED
        if not isinstance(layout, SwizzledLayout) or _storage(region) is None:
            return f"needs a swizzled shared layout for {region.name}", _STAGE_IN_SHARED
        if not _described_part(region, layout, ctx.analyzer):
            reason = f"reads a part of the tile {region.name} that starts inside a swizzle span or row group"
            hint = "pass one stage of the tile, or columns that start on a multiple of its swizzle span"
            return reason, hint
    return None


def _mn_major_operand(op: Gemm, form: WgmmaForm) -> tuple[str, str] | None:
    """The problem with an 8-bit gemm whose operand is not a K-major shared tile, with its fix."""
    if is_fragment_buffer(op.a.buffer) and not form.register_a:
        return (
            f"reads {op.a.dtype} A ({op.a.name}) from shared memory only",
            "copy A into a T.alloc_shared((M, K)) tile and pass that",
        )
    if op.transpose_a:
        return (
            f"reads {op.a.dtype} operands K-major only, and A ({op.a.name}) is stored (K, M) (transpose_A)",
            "store A as (M, K) and drop transpose_A",
        )
    if not op.transpose_b:
        return (
            f"reads {op.a.dtype} operands K-major only, and B ({op.b.name}) is stored (K, N)",
            "store B as (N, K) and pass transpose_B=True (T.copy(B[n0, k0], B_shared) into an "
            "(N, K) tile), or transpose the tile in shared memory first: "
            "for n, k in T.Parallel(N, K): Bt[n, k] = B_shared[k, n]",
        )
    return None


def register_a_starts(op: Gemm, frag: Fragment, threads: int) -> dict[tuple[int, int], int] | None:
    """Local index of each (m64 block, k step)'s A values (8 for a k16 instruction, 4 for
    tf32's k8), the same in every thread.

    ``None`` unless every warpgroup holds each instruction's A tile contiguously in
    the wgmma register-A order (warp w: rows 16w.. in the mma.sync A order).
    """
    m, n, k = (int(as_int(e)) for e in op.mnk)  # type: ignore[arg-type]
    wg_m, wg_n = warpgroup_partition(m, n, threads // WARPGROUP, int(op.policy))
    part_m = m // wg_m
    # the warpgroups of one row band (wg_n > 1) each hold those rows: replicas, read in place
    slots = _slots(frag, all_replicas=True)
    base = wgmma_a(op.a.dtype)
    step = int(base.get_input_shape()[1])
    out: dict[tuple[int, int], int] = {}
    for group in range(threads // WARPGROUP):
        row0 = (group // wg_n) * part_m
        for mi in range(part_m // 64):
            for kk in range(k // step):
                start = tile_local_base(slots, base, (row0 + 64 * mi, step * kk), group * WARPGROUP)
                if start is None or out.setdefault((mi, kk), start) != start:
                    return None
    return out


def _desc_call(region: Region, desc: OperandDesc, row: Any, col: Any) -> Any:
    """``tile_wgmma_desc(&tile[row][col], lbo, sbo, swizzle)`` over the operand's logical coords."""
    buffer = region.buffer
    indices = _at(region, row, col)
    offset: Any = tirx.const(0, "int32")
    for index, dim in zip(indices, buffer.shape, strict=True):
        offset = offset * dim + index
    extent = 1
    for dim in buffer.shape:
        extent *= int(as_int(dim) or 0)  # the buffer's end: the operand may be any stage of it
    ptr = buffer.access_ptr("r", offset=offset, extent=tirx.const(extent, "int32") - offset)
    return tirx.call_extern(
        "uint64",
        "tile_wgmma_desc",
        ptr,
        tirx.const(desc.lbo_bytes, "uint32"),
        tirx.const(desc.sbo_bytes, "uint32"),
        tirx.const(desc.swizzle_bytes, "int32"),
    )


def lower_gemm_wgmma(op: Any, ctx: LowerContext) -> Any:
    """``T.gemm`` with wgmma (see module docstring); other gemms go to the mma.sync rule."""
    assert isinstance(op, Gemm)
    if op.impl is not None or not has_warpgroup_form(ctx.capabilities, op.a.dtype, op.c.dtype):
        # impl="cute": the mma.sync rule dispatches it; dtypes without a wgmma form (int8,
        # float64): infer_layout gave the gemm mma.sync's layouts (some equal a warpgroup's)
        return lower_gemm_mma(op, ctx)
    why = _why_not(op, ctx)
    form = WGMMA_FORMS.get(op.a.dtype)
    if why is not None and form is not None and form.k_major_only:
        # a tf32 gemm wgmma cannot read (an MN-major operand): mma.sync, which keeps the
        # warpgroup accumulator's warp order, so it agrees with the kernel's wgmma gemms
        return lower_gemm_mma(op, ctx)
    if why is not None:
        reason, hint = why
        c = ctx.layouts.get(op.c.name)
        m, n = as_int(op.mnk[0]), as_int(op.mnk[1])
        wg = (
            warpgroup_fragment(m, n, ctx.threads, 256, int(op.policy))
            if m is not None and n is not None and ctx.threads
            else None
        )
        if isinstance(c, Fragment) and wg is not None and same_fragment(c, wg):
            raise ctx.error(
                UnsupportedOnTargetError,
                f"T.gemm on sm_90a {reason}",
                hint=hint,
            )
        return lower_gemm_mma(op, ctx)
    m, n, k = (int(as_int(e)) for e in op.mnk)  # type: ignore[arg-type]
    threads, tx = int(ctx.threads), ctx.thread_var  # type: ignore[arg-type]
    c_frag = ctx.layouts[op.c.name]
    groups = threads // WARPGROUP
    wg_m, wg_n = warpgroup_partition(m, n, groups, int(op.policy))
    part_m, part_n = m // wg_m, n // wg_n
    group = tirx.floordiv(tx, WARPGROUP)
    row0 = tirx.floordiv(group, wg_n) * part_m
    col0 = tirx.floormod(group, wg_n) * part_n
    b_rows, _ = _storage(op.b) or (0, 0)
    a_frag = ctx.layouts[op.a.name]
    a_starts = register_a_starts(op, a_frag, threads) if isinstance(a_frag, Fragment) else None
    a_desc = None
    if a_starts is None:
        a_rows, _ = _storage(op.a) or (0, 0)
        a_desc = operand_desc(ctx.layouts[op.a.name], a_rows, not op.transpose_a)
    b_desc = operand_desc(ctx.layouts[op.b.name], b_rows, op.transpose_b)
    form = WGMMA_FORMS[op.a.dtype]
    dt, kstep = form.name, form.k
    span_b = b_desc.swizzle_bytes * 8 // dtype_bits(op.b.dtype)
    pieces = _pieces(part_n)
    offsets = [sum(pieces[:i]) for i in range(len(pieces))]
    if not b_desc.k_major and any(o % span_b for o in offsets):
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.gemm on sm_90a: an N of {part_n} per warpgroup does not split into wgmma tiles "
            f"on {span_b}-column blocks of {op.b.name}",
            hint="use an N per warpgroup of 8..256 that is one wgmma N (e.g. 64, 128, 256)",
        )

    def c_ptr(local: int) -> Any:
        coords = fragment_inverse(c_frag, tx, tirx.const(local, "int32"))
        return _ptr(op.c.buffer, _at(op.c, coords[0], coords[1]))

    stmts: list[Any] = []
    if op.clear_accum:
        stmts.append(clear_accumulator(op, c_frag, tx))
    per_block = part_n // 2  # accumulators of one m64 x part_n instruction row
    # wgmma reads shared memory through the async proxy: this thread's earlier generic
    # stores to its operands (a fragment copied to shared, a plain global->shared copy)
    # must be fenced before the barrier that precedes the wgmma, or the tensor core may
    # read stale data (the emulator reports it; the likely cause of the wrong MLA decode
    # and 1-stage FlashAttention results seen on an H100).
    stmts.append(_call("tile_fence_proxy_async"))
    stmts.append(_call("tile_wgmma_fence"))
    for kk in range(k // kstep):
        for mi in range(part_m // 64):
            m0 = row0 + 64 * mi
            if a_desc is not None:
                a_row, a_col = (m0, kk * kstep) if a_desc.k_major else (kk * kstep, m0)
                a_arg = _desc_call(op.a, a_desc, a_row, a_col)
                call_form = f"ss_{dt}_f32<{a_desc.trans}, {b_desc.trans}>"
            else:  # this thread's A values of the instruction, where lower_fragments puts them
                assert a_starts is not None and isinstance(a_frag, Fragment)
                start = tirx.const(a_starts[(mi, kk)], "int32")
                coords = (
                    fragment_replica_coords(a_frag, tx, start)[0]  # the copy this thread holds
                    if a_frag.replicate_size > 1
                    else fragment_inverse(a_frag, tx, start)
                )
                a_arg = _ptr(op.a.buffer, _at(op.a, coords[0], coords[1]))
                call_form = f"rs_{dt}_f32<{b_desc.trans}>"
            for piece, n_off in zip(pieces, offsets, strict=True):
                n0 = col0 + n_off
                b_row, b_col = (n0, kk * kstep) if b_desc.k_major else (kk * kstep, n0)
                desc_b = _desc_call(op.b, b_desc, b_row, b_col)
                wrapper = f"tile_wgmma_m64n{piece}k{kstep}_{call_form}"
                local = mi * per_block + n_off // 2
                stmts.append(_call(wrapper, c_ptr(local), a_arg, desc_b, tirx.const(1, "int32")))
    stmts.append(_call("tile_wgmma_commit"))
    stmts.append(_call("tile_wgmma_wait<0>"))
    for mi in range(part_m // 64):  # accumulator reads stay after the wait
        stmts.append(_call("tile_wgmma_fence_operand", c_ptr(mi * per_block), tirx.const(per_block, "int32")))
    return tirx.SeqStmt(stmts)


register_lowering(Gemm, target="cuda", when=wgmma_available)(lower_gemm_wgmma)


def shared_layouts_applied(target: Target) -> bool:
    """Whether shared tiles are stored under their inferred (swizzled) layouts on ``target``:
    every CUDA pipeline runs ``apply_shared_layouts`` (on sm_80/86/89 too: the swizzled
    operand tiles keep each ``ldmatrix`` of 8 rows of 16 bytes on 32 distinct banks, where
    a row-major 64-byte row pitch puts 4 of its rows on the same banks). Lowerings that
    address shared memory other than through loads, stores and ``tvm_access_ptr`` (CuTe's
    tensor views) ask this instead of assuming."""
    return target.kind == "cuda"


__all__ = [
    "APPLY_SHARED_LAYOUTS",
    "WGMMA_FORMS",
    "OperandDesc",
    "apply_shared_layouts",
    "lower_gemm_wgmma",
    "operand_desc",
    "shared_layouts_applied",
    "wgmma_available",
]
