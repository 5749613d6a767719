"""``T.copy`` from a register fragment to a 16-bit shared tile with ``stmatrix`` (sm_90+).

``stmatrix.sync.aligned.m8n8.x{1,2,4}.b16`` stores up to four 8x8 matrices per warp:
lane ``l`` gives the row address of row ``l % 8`` of matrix ``l // 8`` and, for each
matrix ``q``, one 32-bit register holding row ``l // 4``, columns ``2(l % 4)`` and
``2(l % 4) + 1`` (``tile.layout.hardware.ldmatrix_fragment(1)``, the same map as
ldmatrix). That is how the mma.sync and wgmma accumulators hold every 8x8 block of C,
so the epilogue ``T.copy(C_local, C_shared)`` of a GEMM or attention kernel stores
16 bytes a row per instruction instead of one element per store.

:func:`stmatrix_copy` applies when, in the source fragment's inferred layout, every 8x8
block of the tile is held by one warp in that register order (two consecutive locals
``s``, ``s + 1`` on every lane, ``tile_local_base``), every warp holds its blocks at the
same local starts (so one instruction sequence serves all warps), the destination is
a whole 2-D shared tile of float16/bfloat16 with rows of whole 16-byte chunks, and the
target has stmatrix. Values are converted to the destination type when packed.

Row addresses are ``tvm_access_ptr`` writes in the tile's logical coordinates, so TVM's
barrier placement sees them and ``apply_shared_layouts`` maps each 16-byte row as a
whole through the tile's swizzle (a swizzle permutes 16-byte chunks).
"""

from __future__ import annotations

import itertools
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.ops import Copy, LowerContext
from tile.ir.ops.layout_rules import int_shape, is_fragment_buffer, is_shared_buffer, region_is_whole
from tile.ir.transform.lower_fragments import fragment_coords
from tile.layout import Fragment
from tile.layout.hardware import ldmatrix_fragment

from ..arch import capabilities, parse_arch
from ..errors import CudaArchError
from .gemm import WARP, _slots, _span, tile_local_base

BLOCK = 8
"""Rows and columns of one stmatrix matrix."""
MATRIX_DTYPES = ("float16", "bfloat16")


def stmatrix_available(ctx: LowerContext) -> bool:
    """Whether the target has ``stmatrix`` (sm_90+)."""
    if ctx.target.arch is None:
        return False
    try:
        return bool(capabilities(parse_arch(ctx.target.arch).name).stmatrix)
    except CudaArchError:
        return False


def warp_blocks(frag: Fragment, rows: int, cols: int, threads: int) -> list[int] | None:
    """The local starts of the 8x8 blocks each warp stores, the same for every warp.

    ``None`` when some block is not held by one warp in stmatrix register order, or the
    warps hold their blocks at different locals.
    """
    slots = _slots(frag)
    base = ldmatrix_fragment(1)
    per_warp: dict[int, list[int]] = {}
    for bi in range(rows // BLOCK):
        for bj in range(cols // BLOCK):
            origin = (bi * BLOCK, bj * BLOCK)
            owner = None
            for warp in range(threads // WARP):
                start = tile_local_base(slots, base, origin, warp * WARP)
                if start is not None:
                    owner = (warp, start)
                    break
            if owner is None:
                return None
            per_warp.setdefault(owner[0], []).append(owner[1])
    starts = [sorted(v) for v in per_warp.values()]
    if not starts or any(s != starts[0] for s in starts) or len(per_warp) != threads // WARP:
        return None
    return starts[0]


def stmatrix_copy(op: Copy, ctx: LowerContext) -> Any | None:
    """``T.copy(fragment, shared)`` as ``tile_stmatrix_x*`` calls, or None where it does not apply."""
    src, dst = op.src, op.dst
    if not (is_fragment_buffer(src.buffer) and is_shared_buffer(dst.buffer)) or not stmatrix_available(ctx):
        return None
    frag = ctx.layouts.get(src.name)
    threads, tx = ctx.threads, ctx.thread_var
    if not isinstance(frag, Fragment) or frag.replicate_size > 1 or threads is None or tx is None:
        return None
    shape = int_shape(list(src.buffer.shape))
    if shape is None or len(shape) != 2 or not region_is_whole(src) or threads % WARP:
        return None
    rows, cols = shape
    if str(dst.dtype) not in MATRIX_DTYPES or rows % BLOCK or cols % BLOCK:
        return None
    if int_shape(list(dst.extents)) != [rows, cols] or len(dst.extents) != 2:
        return None
    starts = warp_blocks(frag, rows, cols, threads)
    if starts is None:
        return None
    lane = tirx.floormod(tx, WARP)
    warp_base = tx - lane
    stmts: list[Any] = []
    done = 0
    while done < len(starts):
        left = len(starts) - done
        num = 4 if left >= 4 else 2 if left >= 2 else 1
        chunk = starts[done : done + num]
        done += num
        regs = tirx.decl_buffer((2 * num,), str(dst.dtype), name=f"{src.name}_st", scope="local")
        stmts.append(tirx.AllocBuffer(regs))
        for q, first in enumerate(chunk):
            for half in range(2):
                coords = fragment_coords(frag, tx, tirx.const(first + half, "int32"))[0]
                value = tirx.BufferLoad(src.buffer, [ctx.analyzer.simplify(c) for c in coords])
                if str(value.ty) != str(dst.dtype):
                    value = tirx.Cast(str(dst.dtype), value)
                stmts.append(tirx.BufferStore(regs, value, [tirx.const(2 * q + half, "int32")]))
        # lane l points at row l % 8 of matrix l // 8: the element lane 4 (l % 8) of the warp
        # holds first in that matrix (lanes past 8 * num repeat the first matrices)
        matrix = tirx.floormod(tirx.floordiv(lane, BLOCK), num)
        steps = {b - a for a, b in itertools.pairwise(chunk)}
        local: Any
        if len(steps) <= 1:  # evenly spaced (the usual case): chunk[0] + q * step
            local = tirx.const(chunk[0], "int32") + matrix * (steps.pop() if steps else 0)
        else:
            local = tirx.const(chunk[-1], "int32")
            for q in reversed(range(num - 1)):
                local = tirx.Select(matrix == q, tirx.const(chunk[q], "int32"), local)
        owner = warp_base + tirx.floormod(lane, BLOCK) * 4
        row_coords = [ctx.analyzer.simplify(c) for c in fragment_coords(frag, owner, local)[0]]
        indices = [lo + c for lo, c in zip(dst.mins, row_coords, strict=True)]
        row = _span(dst.buffer, indices, BLOCK, "w")
        call = tirx.call_extern("void", f"tile_stmatrix_x{num}", row, regs.access_ptr("r", extent=2 * num))
        stmts.append(tirx.Evaluate(call))
    return tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]
