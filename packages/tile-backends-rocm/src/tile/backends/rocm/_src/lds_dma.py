"""``T.copy`` global -> LDS on the CDNA LDS DMA (``buffer_load_dword ... lds``).

On gfx90a and gfx942 (``RocmCapabilities.lds_dma``) a buffer load with the ``lds`` bit
writes its dword straight into LDS at ``M0 + 4 * lane`` instead of a VGPR: one
instruction per wave fills 256 contiguous LDS bytes, with no register round trip and no
``ds_write``. ``tile::lds_dma_dword`` (``include/tile_hip/async.h``, sources there) is the
one device entry point; the lowering below decides where it applies.

A copy takes the DMA path when everything below holds, else the vectorized SIMT rule
(``lowering.py``) lowers it as before:

* the target allows it: the arch has LDS DMA and the target option ``lds_dma`` is not
  ``"0"`` (:func:`lds_dma_enabled`; target options are part of the kernel cache key);
* global (a static, compact tensor under 2 GiB: byte offsets are 32-bit) to shared,
  same dtype, 4-byte elements or 2-byte elements in pairs (even row lengths and an even
  column origin, so a dword is two neighbours of one global row);
* the shared side is whole trailing tile(s) of the buffer (leading dims, extent 1, may
  pick a copy) of a multiple of 256 bytes, stored row-major or with the XOR swizzle that
  ``apply_shared_layouts`` applies (2-byte tiles only when swizzled: that pass pads every
  dynamic shared buffer to whole swizzle periods, which keeps the tile 4-byte aligned);
* the kernel's thread count is a multiple of 64.

The LDS side is fixed per lane, so the global side is permuted to match: physical dword
``p = 64 j + l`` of the tile (chunk ``j``, lane ``l``) holds the logical element(s) the
storage layout puts there (its inverse), and lane ``l`` loads that element's global
offset. Chunks go round-robin over the waves. An element outside the source tensor (a
ragged tail in any dim) gets the offset ``num_records``, which the buffer's range check
turns into 0, so no lane is predicated off. The LDS pointer is a ``tvm_access_ptr`` over
the whole tile: ``apply_shared_layouts`` maps its offset and TVM's barrier placement sees
the write; the chunk's byte offset is a separate argument, already physical.
"""

from __future__ import annotations

import math
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.errors import TargetError
from tile.ir.gpu import lower_copy_simt
from tile.ir.ops import Copy, LowerContext, TileOp, register_lowering
from tile.ir.ops.layout_rules import int_shape, is_shared_buffer
from tile.ir.ops.loops import in_bounds, region_indices
from tile.ir.ops.region import Region, as_int
from tile.ir.target import Target
from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs
from tile.ir.transform.properties import TILE_OPS_LOWERED
from tile.layout import SwizzledLayout, dtype_bits

from ..arch import capabilities, parse_arch
from . import lowering as _simt_rules  # noqa: F401  (registered first: the DMA rule below wins over it)

TARGET_KIND = "hip"
LDS_DMA_OPTION = "lds_dma"
"""Target option: ``"0"`` keeps global -> LDS copies on VGPR loads + ``ds_write`` (``"1"``: the default)."""
WAVE = 64
DWORD = 4
CHUNK_BYTES = WAVE * DWORD
"""LDS bytes one wave fills with one ``buffer_load_dword ... lds``."""
MAX_OFFSET = 2**31 - 1
DMA_CALL = "tile::lds_dma_dword"
WAIT_CALL = "tile::wait_vmem"
"""``tile::wait_vmem<N>()`` (``include/tile_hip/waitcnt.h``): ``s_waitcnt vmcnt(N)``."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def lds_dma_requested(target: Target) -> bool:
    """The ``lds_dma`` target option (on unless ``"0"``/``"false"``/...).

    Raises:
        TargetError: the option is not a switch.
    """
    value = target.option(LDS_DMA_OPTION)
    if value is None:
        return True
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise TargetError(
        f"target option {LDS_DMA_OPTION}={value!r} is not a switch",
        hint=f'write {{"{LDS_DMA_OPTION}": "1"}} or {{"{LDS_DMA_OPTION}": "0"}}',
    )


def lds_dma_enabled(target: Target) -> bool:
    """Whether global -> LDS copies may use LDS DMA on ``target`` (arch table and option)."""
    if target.kind != TARGET_KIND:
        return False
    spec = target.option("mcpu") or target.arch or "gfx90a"
    try:
        caps = capabilities(parse_arch(spec))
    except Exception:  # an unknown arch is reported by the backend, not here
        return False
    return caps.lds_dma and caps.lds_dma_max_bytes_per_lane >= DWORD and lds_dma_requested(target)


def _storage(dst: Region, ctx: LowerContext) -> tuple[SwizzledLayout | None, list[int]] | None:
    """The shared tile's storage layout (``None``: row-major) and its logical (trailing) shape."""
    shape = int_shape(list(dst.buffer.shape))
    if shape is None or dst.name in ctx.swizzled_views:
        return None  # a reshape of a swizzled tile: element stores follow the swizzle, the DMA would not
    layout = ctx.layouts.get(dst.name)
    if isinstance(layout, SwizzledLayout):  # what apply_shared_layouts applies, and only that
        logical = [int(d) for d in layout.get_input_shape()]
        if len(logical) > len(shape) or shape[len(shape) - len(logical) :] != logical:
            return None
        return layout, logical
    logical = list(shape)
    while len(logical) > 1 and as_int(dst.extents[len(shape) - len(logical)]) == 1:
        logical = logical[1:]  # leading unit-extent dims select a copy of the tile
    return None, logical


def _plan(op: Copy, ctx: LowerContext) -> tuple[SwizzledLayout | None, list[int], int] | None:
    """``(layout, tile shape, element bytes)`` when the copy can use the DMA, else ``None``."""
    src, dst = op.src, op.dst
    if not is_shared_buffer(dst.buffer) or str(src.buffer.scope()) not in ("", "global"):
        return None
    if str(src.dtype) != str(dst.dtype) or ctx.threads is None or ctx.thread_var is None:
        return None
    if ctx.threads % WAVE != 0 or len(src.buffer.strides) != 0:
        return None
    bits = dtype_bits(str(dst.dtype))
    if bits not in (16, 32):
        return None
    elem = bits // 8
    found = _storage(dst, ctx)
    src_shape = int_shape(list(src.buffer.shape))
    if found is None or src_shape is None:
        return None
    layout, tile = found
    if elem == 2 and layout is None:
        return None  # a row-major 2-byte tile may start 2 bytes into a dword
    lead = len(dst.buffer.shape) - len(tile)
    for axis, size in enumerate(tile):
        if as_int(dst.mins[lead + axis]) != 0 or as_int(dst.extents[lead + axis]) != size:
            return None
    if any(as_int(e) != 1 for e in dst.extents[:lead]):
        return None
    dense = [size for size in tile if size != 1]
    if int_shape(src.dense_extents()) != dense:
        return None
    if math.prod(tile) * elem % CHUNK_BYTES != 0 or math.prod(src_shape) * elem > MAX_OFFSET:
        return None
    if elem == 2:
        # pairs: the tile's rows, the tensor's rows and the column origin are even
        if tile[-1] % 2 != 0 or src_shape[-1] % 2 != 0 or as_int(src.extents[-1]) in (None, 1):
            return None
        if not ctx.analyzer.can_prove(tirx.floormod(src.mins[-1], 2) == 0):
            return None
    return layout, tile, elem


def _logical(layout: SwizzledLayout | None, tile: list[int], element: Any) -> list[Any]:
    """The tile coordinates of physical element ``element`` (flat offset in the tile's storage)."""
    shape = tile if layout is None else [int(d) for d in layout.get_output_shape()]
    coords: list[Any] = []
    for dim in reversed(shape):
        coords.append(tirx.floormod(element, dim))
        element = tirx.floordiv(element, dim)
    physical = list(reversed(coords))
    if layout is None:
        return physical
    return list(layout.inverse().map_forward_index(physical))


def lower_copy_lds_dma(op: TileOp, ctx: LowerContext) -> Any:
    """The DMA lowering of a global -> shared copy, or the SIMT rule when it does not apply."""
    assert isinstance(op, Copy)
    plan = _plan(op, ctx)
    if plan is None:
        return lower_copy_simt(op, ctx)
    layout, tile, elem = plan
    src, dst = op.src, op.dst
    per_dword = DWORD // elem
    tile_elems = math.prod(tile)
    chunks = tile_elems * elem // CHUNK_BYTES
    waves = (ctx.threads or WAVE) // WAVE  # _plan checked threads
    tx = ctx.thread_var
    wave, lane = tirx.floordiv(tx, WAVE), tirx.floormod(tx, WAVE)
    step = tirx.Var("dma_step", "int32")
    chunk = step * waves + wave

    coords = _logical(layout, tile, (chunk * WAVE + lane) * per_dword)
    dense = [c for c, size in zip(coords, tile, strict=True) if size != 1]
    src_idx = region_indices(src, dense)
    src_shape = [int(d) for d in src.buffer.shape]
    flat: Any = tirx.const(0, "int32")
    for index, size in zip(src_idx, src_shape, strict=True):
        flat = flat * size + index
    num_records = math.prod(src_shape) * elem
    offset: Any = flat * elem
    ok = in_bounds(src, src_idx, ctx.analyzer)
    if ok is not None:
        offset = tirx.Select(ok, offset, tirx.const(num_records, "int32"))

    lead = len(dst.buffer.shape) - len(tile)
    base: Any = tirx.const(0, "int32")
    for index, size in zip(dst.mins[:lead], [int(d) for d in dst.buffer.shape[:lead]], strict=True):
        base = base * size + index
    lds = dst.buffer.access_ptr("w", offset=base * tile_elems, extent=tile_elems)
    glb = src.buffer.access_ptr("r", offset=0, extent=math.prod(src_shape))
    call = tirx.Evaluate(
        tirx.call_extern(
            "void", DMA_CALL, lds, chunk * CHUNK_BYTES, glb, offset, tirx.const(num_records, "uint32")
        )
    )
    steps = -(-chunks // waves)
    body: Any = call if chunks % waves == 0 else tirx.IfThenElse(chunk < chunks, call, None)
    # The writes land asynchronously: the copy ends with its wait (merge_vmem_waits keeps one
    # per run of copies; a T.Pipelined ring, lds_ring.py, takes the wait over).
    return tirx.SeqStmt([tirx.For(step, 0, steps, tirx.ForKind.SERIAL, body), wait_vmem(0)])


def wait_vmem(pending: int) -> Any:
    """``tile::wait_vmem<pending>()``: at most ``pending`` vector-memory ops of the wave in flight."""
    return tirx.Evaluate(tirx.call_extern("void", f"{WAIT_CALL}<{pending}>"))


def _extern_name(stmt: Any) -> str | None:
    if not (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, ir.Call)):
        return None
    call = stmt.value
    if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern":
        return str(call.args[0].value)
    return None


def is_vmem_wait(stmt: Any, pending: int | None = None) -> bool:
    """``stmt`` is a ``tile::wait_vmem`` call (with that count, if given)."""
    name = _extern_name(stmt)
    if name is None or not name.startswith(WAIT_CALL + "<"):
        return False
    return pending is None or name == f"{WAIT_CALL}<{pending}>"


def dma_ops_per_wave(stmt: Any) -> int | None:
    """The fewest ``buffer_load ... lds`` any wave issues in ``stmt``, a DMA copy as lowered
    above (its wait, if any, aside); ``None`` if ``stmt`` is anything else.

    Chunks go round-robin over the waves, so only the last step's guard can be false:
    a wave issues ``steps`` or ``steps - 1`` loads.
    """
    parts = list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]
    parts = [p for p in parts if not is_vmem_wait(p)]
    if len(parts) != 1 or not isinstance(parts[0], tirx.For):
        return None
    loop = parts[0]
    if not isinstance(loop.extent, tirx.IntImm):
        return None
    body, steps = loop.body, int(loop.extent.value)
    if isinstance(body, tirx.IfThenElse) and body.else_case is None:
        body, steps = body.then_case, steps - 1
    return steps if _extern_name(body) == DMA_CALL else None


def without_vmem_waits(stmt: Any) -> Any:
    """``stmt`` with its ``tile::wait_vmem`` calls dropped (a ring waits for the copy itself)."""

    def on_seq(node: Any) -> Any:
        kept = [s for s in node.seq if not is_vmem_wait(s)]
        if len(kept) == len(node.seq):
            return node
        return tirx.Evaluate(0) if not kept else kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

    return tvm_ffi.structural_map(stmt, (tirx.SeqStmt, on_seq))


def _only_dma(stmt: Any) -> bool:
    """``stmt`` issues DMA loads and nothing else (no store, no other call: reads no LDS)."""
    found = {"dma": False, "other": False}

    def on_evaluate(node: Any) -> None:
        key = "dma" if _extern_name(node) == DMA_CALL else "other"
        found[key] = True

    def on_store(_node: Any) -> None:
        found["other"] = True

    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, on_evaluate), (tirx.BufferStore, on_store)])
    return found["dma"] and not found["other"]


def _flat(seq: Any) -> list[Any]:
    out: list[Any] = []
    for s in seq.seq:
        out += _flat(s) if isinstance(s, tirx.SeqStmt) else [s]
    return out


def merge_vmem_waits(mod: Any, ctx: CompileContext) -> Any:
    """One ``wait_vmem<0>`` per run of DMA copies.

    Needs: DMA copies as ``lower_copy_lds_dma`` leaves them (each followed by its wait).
    Guarantees: a ``wait_vmem<0>`` followed, through statements that only issue DMA loads,
    by another ``wait_vmem<0>`` is gone (the later one covers its loads: vmcnt counts in
    issue order), so the copies of A and B fly together; every other wait stays.
    """

    def on_seq(node: Any) -> Any:
        stmts = _flat(node)
        keep = [True] * len(stmts)
        for i, s in enumerate(stmts):
            if not is_vmem_wait(s, 0):
                continue
            j = i + 1
            while j < len(stmts) and not is_vmem_wait(stmts[j], 0) and _only_dma(stmts[j]):
                j += 1
            if j < len(stmts) and j > i + 1 and is_vmem_wait(stmts[j], 0):
                keep[i] = False
        if all(keep):
            return node
        return tirx.SeqStmt([s for s, k in zip(stmts, keep, strict=True) if k])

    return map_prim_funcs(mod, lambda f: f.with_body(tvm_ffi.structural_map(f.body, (tirx.SeqStmt, on_seq))))


VMEM_WAITS_MERGED = Property(
    "vmem_waits_merged", "no vmcnt(0) wait is followed, through DMA loads only, by another"
)
MERGE_VMEM_WAITS = Pass(
    "merge_vmem_waits", merge_vmem_waits, needs={TILE_OPS_LOWERED}, guarantees={VMEM_WAITS_MERGED}
)


register_lowering(Copy, target=TARGET_KIND, when=lds_dma_enabled)(lower_copy_lds_dma)
