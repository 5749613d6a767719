"""``T.cumsum`` and ``T.cummax``: inclusive prefix sum (or running maximum) of a tile along one
dimension."""

from __future__ import annotations

from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

from ..errors import TileShapeError, TileTypeError
from .base import LowerContext, TileOp, tile_op
from .loops import bind_ranges, cast_to, fresh_vars, parallel_nest
from .region import Region, as_int, extents_match, format_extents, normalize_dim, region_of
from .registry import register_lowering

SCAN_KINDS = ("sum", "max")
"""What a scan combines: ``T.cumsum`` sums, ``T.cummax`` keeps the largest."""


@tile_op
class Cumsum(TileOp):
    """``dst[..., k, ...] = sum(src[..., j, ...] for j <= k)`` along ``dim``.

    With ``reverse=True`` the sum runs from the end: ``j >= k`` (a suffix sum).
    ``dst`` has ``src``'s shape and may be ``src`` itself (the default, in place).
    Sums accumulate in ``dst``'s dtype. ``kind="max"`` is the running maximum instead
    (``T.cummax``): the same scan with ``max`` for ``+``.
    """

    op_name = "tile.cumsum"

    def __init__(self, src: Region, dst: Region, dim: int, reverse: bool, kind: str = "sum") -> None:
        self.src, self.dst, self.dim, self.reverse, self.kind = src, dst, dim, reverse, kind

    def combine(self, acc: Any, value: Any) -> Any:
        """The scan's step: ``acc + value``, or the larger of the two for ``kind="max"``."""
        return tirx.max(acc, value) if self.kind == "max" else acc + value

    @classmethod
    def build(cls, src: object, dst: object, dim: int, reverse: bool, kind: str = "sum") -> Cumsum:
        """Check the operands and make the op (``dst=None`` means in place).

        Raises:
            TileTypeError: an operand is a single element.
            TileShapeError: ``dim`` is out of range or the shapes differ.
        """
        if kind not in SCAN_KINDS:
            raise TileTypeError(f"scan kind {kind!r} is not one of {', '.join(SCAN_KINDS)}")
        name = "T.cummax" if kind == "max" else "T.cumsum"
        src_region, src_buf, _ = region_of(src, f"{name} source")
        dst_region, dst_buf, _ = (
            (src_region, src_buf, ()) if dst is None else region_of(dst, f"{name} destination")
        )
        if src_region is None or dst_region is None:
            raise TileTypeError(
                f"{name} operands must be whole buffers or slices, not single elements",
                hint=f"write {name}(buf, dim=0) or {name}(src, dst, dim=1)",
            )
        if not isinstance(dim, int):
            raise TileTypeError(f"{name} dim must be a Python int, got {type(dim).__name__}")
        rank = len(src_region.extents)
        axis = normalize_dim(name[2:], dim, rank, src_buf)
        if len(dst_region.extents) != rank or extents_match(src_region.extents, dst_region.extents) is False:
            raise TileShapeError(
                f"{name}: {dst_buf.name} spans {format_extents(dst_region.extents)} "
                f"but {src_buf.name} spans {format_extents(src_region.extents)}",
                hint="the destination has the source's shape",
            )
        return cls(src_region, dst_region, axis, bool(reverse), kind)

    @classmethod
    def decode(cls, call: ir.Call) -> Cumsum:
        dim = as_int(call.args[2]) or 0
        reverse = bool(as_int(call.args[3]))
        kind = SCAN_KINDS[as_int(call.args[4]) or 0] if len(call.args) > 4 else "sum"
        return cls(Region.from_expr(call.args[0]), Region.from_expr(call.args[1]), dim, reverse, kind)

    def encode(self) -> ir.Call:
        return tirx.call_intrin(
            "handle",
            self.op_name,
            self.src.to_expr(),
            self.dst.to_expr(),
            tirx.const(self.dim, "int32"),
            tirx.const(int(self.reverse), "int32"),
            tirx.const(SCAN_KINDS.index(self.kind), "int32"),
        )


@register_lowering(Cumsum)
def lower_cumsum_loops(op: TileOp, ctx: LowerContext) -> Any:
    """Generic rule: a ``T.Parallel`` nest over the other dims, a serial scan along ``dim``.

    Step ``k`` reads ``src`` at ``k`` before writing ``dst`` at ``k`` and otherwise only
    reads ``dst`` at the previous step, so ``dst`` may alias ``src``.
    """
    assert isinstance(op, Cumsum)
    extents = list(op.src.extents)
    n = extents[op.dim]
    kept = [e for d, e in enumerate(extents) if d != op.dim]
    out_vars = fresh_vars("i", len(kept))
    k = fresh_vars("k", 1)[0]
    bind_ranges(ctx.analyzer, [*out_vars, k], [*kept, n])

    def at(region: Region, step: ir.Expr) -> list[ir.Expr]:
        it = iter(out_vars)
        return [lo + (step if d == op.dim else next(it)) for d, lo in enumerate(region.mins)]

    one = tirx.const(1, "int32")
    first = (n - one) if op.reverse else tirx.const(0, "int32")
    pos = (n - one - k) if op.reverse else k
    prev = (pos + one) if op.reverse else (pos - one)

    def src_at(step: ir.Expr) -> ir.Expr:
        return cast_to(op.dst.dtype, tirx.BufferLoad(op.src.buffer, at(op.src, step)))

    # The first element starts the scan; the loop from k = 1 never reads before it.
    start = tirx.BufferStore(op.dst.buffer, src_at(first), at(op.dst, first))
    running = op.combine(tirx.BufferLoad(op.dst.buffer, at(op.dst, prev)), src_at(pos))
    scan = tirx.For(
        k, 1, n - one, tirx.ForKind.SERIAL, tirx.BufferStore(op.dst.buffer, running, at(op.dst, pos))
    )
    return parallel_nest(out_vars, kept, tirx.SeqStmt([start, scan]))
