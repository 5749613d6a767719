"""``T.copy``: move a tile between memory scopes (global, shared, fragment, local)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import ir, tirx

from tile.layout import dtype_bits

from ..errors import TileShapeError
from .base import LowerContext, TileOp, tile_op
from .layout_rules import is_fragment_buffer, is_shared_buffer, region_is_whole, shared_operand_layout
from .loops import bind_ranges, cast_to, fresh_vars, in_bounds, parallel_nest, region_indices
from .region import Region, as_int, corner_region, extents_match, format_extents, region_of
from .registry import register_lowering


@tile_op
class Copy(TileOp):
    """Copy ``src`` to ``dst``, converting the element type if they differ.

    Regions may differ in unit dims (a row of a 2-D tensor into a 1-D buffer). Where
    their other extents differ, the copy covers the region of the more local operand
    (a fragment or local buffer, then shared memory, then global memory; the source's
    on a tie), as TileLang does: ``T.copy(A[:, :2], B[:, :3])`` copies two columns
    (see :func:`covered_regions`). Accesses that may fall outside a buffer (the tail
    tile of a tensor whose size is not a multiple of the tile) are guarded: reads
    outside yield 0, writes outside are skipped.
    """

    op_name = "tile.copy"

    def __init__(self, src: Region, dst: Region) -> None:
        self.src = src
        self.dst = dst

    @classmethod
    def build(cls, src: object, dst: object, warn: Callable[[str], None] | None = None) -> Copy:
        """Make a copy from user operands (buffer, slice or start corner), inferring extents.

        ``warn(message)`` is told when the two regions' extents differ and one was chosen
        (:func:`covered_regions`).

        Raises:
            TileShapeError: both operands are corners, the ranks differ, or the extents
                differ and the region copied would be smaller than the source's.
        """
        src_region, src_buf, src_corner = region_of(src, "copy source")
        dst_region, dst_buf, dst_corner = region_of(dst, "copy destination")
        if src_region is None and dst_region is None:
            raise TileShapeError(
                f"T.copy cannot infer the copied extent: both {src_buf.name}[...] "
                f"and {dst_buf.name}[...] are single elements",
                hint="make one operand a whole buffer or a slice like A[i:i + 32, j:j + 32]",
            )
        if src_region is None:
            assert dst_region is not None
            src_region = corner_region(src_buf, src_corner, dst_region.extents, "copy source")
        if dst_region is None:
            dst_region = corner_region(dst_buf, dst_corner, src_region.extents, "copy destination")
        src_dense, dst_dense = src_region.dense_extents(), dst_region.dense_extents()
        if len(src_dense) != len(dst_dense):
            raise TileShapeError(
                f"T.copy ranks differ: source {src_region.name} spans {len(src_dense)} dims "
                f"{format_extents(src_dense)}, destination {dst_region.name} spans {len(dst_dense)} "
                f"{format_extents(dst_dense)}",
                hint="index the higher-rank operand with a slice so both span the same dims "
                "(unit dims may differ), e.g. A[b, 0:32, 0:32]",
            )
        if extents_match(src_region.extents, dst_region.extents) is False:
            src_region, dst_region, message = covered_regions(src_region, dst_region)
            if warn is not None:
                warn(message)
        return cls(src_region, dst_region)

    @classmethod
    def decode(cls, call: ir.Call) -> Copy:
        return cls(Region.from_expr(call.args[0]), Region.from_expr(call.args[1]))

    def encode(self) -> ir.Call:
        return tirx.call_intrin("handle", self.op_name, self.src.to_expr(), self.dst.to_expr())

    def infer_layout(self, ctx: LowerContext) -> Mapping[str, Any]:
        """Level 2: a fragment-to-fragment copy of whole buffers gives both one fragment.

        A copy between memory and a fragment runs as a parallel loop over the
        fragment, so it follows whatever binds the fragment; if nothing does, the free
        step gives it the row-major thread binding (the generic rule).

        In the free step, on targets that store register matrices to shared memory
        (``Capabilities.matrix_store``: stmatrix on sm_90), a whole 16-bit shared tile
        that a fragment is stored into (a GEMM or attention epilogue's ``C_shared``) and
        that nothing else placed gets the swizzled layout of shared gemm operands: each
        instruction stores 8 rows of 16 bytes, which row-major puts on the same banks
        whenever the row pitch is a multiple of 128 bytes. (Element-wise stores pay the
        swizzle's address arithmetic per element, which made sm_80's MLA decode spill.)
        """
        out = dict(super().infer_layout(ctx))
        dst = self.dst
        if (
            ctx.free
            and ctx.capabilities.matrix_store
            and is_fragment_buffer(self.src.buffer)
            and is_shared_buffer(dst.buffer)
            and region_is_whole(dst)
            and dst.name not in ctx.layouts
            and dtype_bits(str(dst.dtype)) == 16
        ):
            layout = shared_operand_layout(dst.buffer)
            if layout is not None:
                out[dst.name] = layout
        return out


_LOCALITY = {"global": 0, "shared": 1, "shared.dyn": 1}
"""How far from the registers a scope is: a copy covers the more local operand's region
(fragments and local buffers, absent here, rank 2)."""


def covered_regions(src: Region, dst: Region) -> tuple[Region, Region, str]:
    """The source and destination regions a copy between regions of different extents
    covers, and a message that says which.

    TileLang's rule: the copy loops over the region of the more local operand (a fragment
    or local buffer, then shared memory, then global memory; the source on a tie), and both
    operands take those extents from their own corners. A source region larger than what
    is covered is refused (part of it would be silently dropped); a destination region
    larger than what is covered is only partly written. Accesses stay guarded by the
    buffers' shapes, as for any copy.

    Raises:
        TileShapeError: the covered region is provably smaller than the source's in some
            dim (the destination is the more local operand and too small).
    """
    src_dense, dst_dense = src.dense_extents(), dst.dense_extents()
    by_dst = _LOCALITY.get(dst.scope, 2) > _LOCALITY.get(src.scope, 2)
    covered = dst_dense if by_dst else src_dense
    described = (
        f"T.copy extents differ: source {src.name} spans {format_extents(src_dense)}, "
        f"destination {dst.name} spans {format_extents(dst_dense)}"
    )
    analyzer = tvm.sym.Analyzer()
    if by_dst and any(
        analyzer.can_prove(tirx.LT(c, s)) for c, s in zip(covered, src_dense, strict=True)
    ):
        raise TileShapeError(
            f"{described}; the destination is the more local buffer, so the copy would "
            "cover its smaller region and drop part of the source",
            hint="slice both operands to the same tile shape (unit dims may differ)",
        )
    message = (
        f"{described}; copying {format_extents(covered)}, the "
        f"{'destination' if by_dst else 'source'}'s region (TileLang's rule: the more local "
        "operand's region, the source's on a tie); slice both operands to one shape to say so"
    )
    return _with_dense_extents(src, covered), _with_dense_extents(dst, covered), message


def _with_dense_extents(region: Region, dense: list[ir.Expr]) -> Region:
    """``region`` with its dims that are not 1 given the extents ``dense``, in order."""
    given = iter(dense)
    extents = tuple(e if as_int(e) == 1 else next(given) for e in region.extents)
    return Region(region.buffer, region.mins, extents)


@register_lowering(Copy)
def lower_copy_loops(op: TileOp, ctx: LowerContext) -> Any:
    """Generic rule: a ``T.Parallel`` nest over the tile, one guarded element per iteration."""
    assert isinstance(op, Copy)
    if len(op.src.dense_extents()) != len(op.dst.dense_extents()):
        raise ctx.error(TileShapeError, "T.copy operands have different numbers of non-unit dims")
    return copy_nest(op, ctx.analyzer)


def copy_nest(op: Copy, analyzer: Any, outside: Any = None) -> Any:
    """``op`` as a ``T.Parallel`` nest over its tile: each element is read guarded by the
    source's shape (``outside``, of the source's type, where the read falls outside it; 0 when
    None) and stored guarded by the destination's."""
    extents = op.src.dense_extents()
    loop_vars = fresh_vars("i", len(extents))
    bind_ranges(analyzer, loop_vars, extents)
    src_idx = region_indices(op.src, loop_vars)
    dst_idx = region_indices(op.dst, loop_vars)
    value = cast_to(op.dst.dtype, tirx.BufferLoad(op.src.buffer, src_idx))
    src_ok = in_bounds(op.src, src_idx, analyzer)
    if src_ok is not None:
        fill = tirx.const(0, op.dst.dtype) if outside is None else cast_to(op.dst.dtype, outside)
        value = tirx.if_then_else(src_ok, value, fill)
    store: Any = tirx.BufferStore(op.dst.buffer, value, dst_idx)
    dst_ok = in_bounds(op.dst, dst_idx, analyzer)
    if dst_ok is not None:
        store = tirx.IfThenElse(dst_ok, store, None)
    return parallel_nest(loop_vars, extents, store)
