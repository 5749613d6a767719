"""``T.fill`` / ``T.clear``: set every element of a tile to one value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

from ..errors import TileTypeError
from .base import LowerContext, TileOp, tile_op
from .layout_rules import LAYOUT_FREE
from .loops import bind_ranges, cast_to, fresh_vars, in_bounds, parallel_nest, region_indices, serial_loop
from .region import Region, is_buffer, region_of
from .registry import register_lowering


@tile_op
class Fill(TileOp):
    """Store ``value`` (converted to the buffer's dtype) into every element of ``dst``."""

    op_name = "tile.fill"

    def __init__(self, dst: Region, value: ir.Expr) -> None:
        self.dst = dst
        self.value = value

    @classmethod
    def build(cls, dst: object, value: object) -> Fill:
        """Make a fill from a user operand (buffer or slice) and a scalar value."""
        region, buf, _ = region_of(dst, "fill destination")
        if region is None:
            raise TileTypeError(
                f"T.fill needs a buffer or a slice, got the single element {buf.name}[...]",
                hint="write T.fill(buf, v), T.fill(buf[a:b, c:d], v), or assign the element directly",
            )
        if isinstance(value, bool | int | float):
            expr = tirx.const(value, region.dtype)
        elif isinstance(value, ir.Expr) and not is_buffer(value):
            expr = value
        else:
            raise TileTypeError(
                f"T.fill value must be a scalar, got {type(value).__name__}",
                hint="to copy a tile into another, use T.copy(src, dst)",
            )
        return cls(region, cast_to(region.dtype, expr))

    @classmethod
    def decode(cls, call: ir.Call) -> Fill:
        return cls(Region.from_expr(call.args[0]), call.args[1])

    def encode(self) -> ir.Call:
        return tirx.call_intrin("handle", self.op_name, self.dst.to_expr(), self.value)

    layout_level = LAYOUT_FREE

    def infer_layout(self, ctx: LowerContext) -> Mapping[str, Any]:
        """No constraint: every thread stores its own elements under any fragment."""
        return {}


@register_lowering(Fill)
def lower_fill_loops(op: TileOp, ctx: LowerContext) -> Any:
    """Generic rule: a ``T.Parallel`` nest storing the value, guarded at buffer edges. A
    per-thread ``T.alloc_local`` array is filled by serial loops on every thread: each
    thread owns all of its elements (splitting them over threads would leave most unset).
    One element of shared or global memory is filled by one thread, as a tile of any
    other size is split over threads: were every thread to store it, a late thread's
    store could undo an update made after the fill (``T.clear(B); T.atomic_add(B, 1)``)."""
    assert isinstance(op, Fill)
    extents = op.dst.dense_extents()
    loop_vars = fresh_vars("i", len(extents))
    bind_ranges(ctx.analyzer, loop_vars, extents)
    idx = region_indices(op.dst, loop_vars)
    store: Any = tirx.BufferStore(op.dst.buffer, op.value, idx)
    ok = in_bounds(op.dst, idx, ctx.analyzer)
    if ok is not None:
        store = tirx.IfThenElse(ok, store, None)
    if str(op.dst.buffer.scope()) == "local":
        for var, extent in reversed(list(zip(loop_vars, extents, strict=True))):
            store = serial_loop(var, extent, store)
        return store
    if not extents and not str(op.dst.buffer.scope()).startswith("local"):
        return parallel_nest(fresh_vars("i", 1), [tirx.const(1, "int32")], store)
    return parallel_nest(loop_vars, extents, store)
