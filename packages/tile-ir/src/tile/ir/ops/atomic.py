"""``T.atomic_add/max/min``: read-modify-write updates that other blocks may race with.

Three forms, as in TileLang:

* scalar: ``T.atomic_add(C[i, j], v)`` updates one element with a scalar;
* region: ``T.atomic_add(C[by * bm, bx * bn], C_local)`` (or a slice, or a whole
  buffer) updates a tile element-wise with a tile of the same extent; a corner
  operand takes its extent from the value tile;
* scalar over a tile: ``T.atomic_add(C[0:bm, 0:bn], 1.0)`` (a slice or a whole buffer)
  updates every element of the tile with the same scalar.

The region forms are tile operations, done once per block; the scalar form is done
by every thread that runs it.

The generic lowering emits the plain update ``dst = op(dst, value)`` wrapped in an
``AttrStmt`` with key ``ATOMIC_UPDATE`` whose node is the destination buffer. That
marker is the contract with the backend: the update must be atomic with respect to
every other block that may run at the same time. A backend either registers its own
rule with hardware atomics, or (the CPU, whose LLVM code generator in apache-tvm 0.27
has no atomic read-modify-write) runs the blocks of a kernel that updates a global
buffer this way one after another (``serialize_block_grid``), which is correct by
construction. The marker must be consumed before code generation.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..errors import TileShapeError, TileTypeError
from .base import LowerContext, TileOp, tile_op
from .loops import bind_ranges, cast_to, fresh_vars, in_bounds, parallel_nest, region_indices
from .region import (
    Region,
    as_int,
    check_same_extents,
    corner_region,
    is_buffer,
    region_of,
)
from .registry import register_lowering

ATOMIC_KINDS = ("add", "max", "min", "and", "or", "xor")
BITWISE_ATOMIC_KINDS = ("and", "or", "xor")
"""Updates of integer elements by ``&``, ``|`` and ``^`` (the bitwise ``T.alloc_reducer`` ops)."""

ATOMIC_UPDATE = "tile.atomic_update"
"""``AttrStmt`` key around a lowered atomic update; its node is the updated buffer."""

BLOCK_LOCAL_SCOPES = ("shared", "shared.dyn", "local", "local.fragment", "local.var")
"""Scopes a block owns privately: atomics on them never race with other blocks."""


def _combine(kind: str, old: ir.Expr, value: ir.Expr) -> ir.Expr:
    if kind == "add":
        return old + value
    if kind in BITWISE_ATOMIC_KINDS:
        return getattr(tirx, f"bitwise_{kind}")(old, value)
    return tirx.max(old, value) if kind == "max" else tirx.min(old, value)


atomic_combine = _combine
"""``atomic_combine(kind, old, value)``: the element after a ``kind`` atomic (``ATOMIC_KINDS``)."""


def is_cross_block(buffer: Any) -> bool:
    """Whether blocks other than the updating one can see ``buffer`` (global memory)."""
    return str(buffer.scope()) not in BLOCK_LOCAL_SCOPES


@tile_op
class Atomic(TileOp):
    """``dst = kind(dst, value)`` performed atomically, element by element.

    ``value`` is a scalar expression (the scalar form, ``dst`` one element; with
    ``over_tile`` every element of the tile ``dst``) or a ``Region`` with ``dst``'s
    extents (the region form). Values are converted to ``dst``'s dtype before the update.
    """

    op_name = "tile.atomic"

    def __init__(self, kind: str, dst: Region, value: Region | ir.Expr, over_tile: bool = False) -> None:
        self.kind, self.dst, self.value = kind, dst, value
        self.over_tile = over_tile or isinstance(value, Region)

    @property
    def is_region(self) -> bool:
        return isinstance(self.value, Region)

    @classmethod
    def build(cls, kind: str, dst: object, value: object) -> Atomic:
        """Make the op from user operands (see the module docstring for the forms).

        Raises:
            TileTypeError: unknown kind, or operands of neither form.
            TileShapeError: the region extents differ.
        """
        if kind not in ATOMIC_KINDS:
            raise TileTypeError(
                f"unknown atomic operation {kind!r}", hint=f"use one of {', '.join(ATOMIC_KINDS)}"
            )
        name = f"T.atomic_{kind}"
        dst_region, dst_buf, dst_corner = region_of(dst, f"{name} destination")
        if kind in BITWISE_ATOMIC_KINDS and not str(dst_buf.dtype).startswith(("int", "uint")):
            raise TileTypeError(
                f"{name} of {dst_buf.name}: {dst_buf.dtype} has no bitwise operations",
                hint="update an integer buffer, or T.reinterpret the values as integers first",
            )
        if is_buffer(value) or isinstance(value, ir.TensorRegion):
            val_region, _, _ = region_of(value, f"{name} value")
            assert val_region is not None
            if dst_region is None:
                dst_region = corner_region(dst_buf, dst_corner, val_region.extents, f"{name} destination")
            check_same_extents(
                name, ("destination", dst_region), ("value", val_region),
                hint="slice both operands to the same tile shape, or pass a start corner like C[i, j]",
            )  # fmt: skip
            return cls(kind, dst_region, val_region)
        if isinstance(value, bool | int | float | ir.Expr):
            dtype = str(dst_buf.dtype)
            expr = tirx.const(value, dtype) if isinstance(value, bool | int | float) else value
            assert isinstance(expr, ir.Expr)
            if int(tvm_ffi.dtype(str(expr.ty)).lanes) != 1:
                raise TileTypeError(
                    f"{name} takes a scalar or a buffer tile as value, got a {expr.ty} vector",
                    hint=f"write {name}(C[i, j], v) per element, or T.atomic_addx2/x4 for vectors",
                )
            if dst_region is not None:  # the same scalar into every element of the tile
                return cls(kind, dst_region, cast_to(dtype, expr), over_tile=True)
            one = tirx.const(1, "int32")
            element = Region(dst_buf, tuple(dst_corner), tuple(one for _ in dst_corner))
            return cls(kind, element, cast_to(dtype, expr))
        raise TileTypeError(
            f"{name} value must be a scalar or a buffer tile, got {type(value).__name__}",
            hint=f"write {name}(C[i, j], v) or {name}(C[i, j], C_local)",
        )

    @classmethod
    def decode(cls, call: ir.Call) -> Atomic:
        kind = ATOMIC_KINDS[as_int(call.args[0]) or 0]
        dst = Region.from_expr(call.args[1])
        raw = call.args[2]
        form = as_int(call.args[3])
        value: Region | ir.Expr = Region.from_expr(raw) if form == _REGION_VALUE else raw
        return cls(kind, dst, value, over_tile=form == _SCALAR_OVER_TILE)

    def encode(self) -> ir.Call:
        value = self.value.to_expr() if isinstance(self.value, Region) else self.value
        form = _REGION_VALUE if self.is_region else _SCALAR_OVER_TILE if self.over_tile else _SCALAR
        return tirx.call_intrin(
            "handle",
            self.op_name,
            tirx.const(ATOMIC_KINDS.index(self.kind), "int32"),
            self.dst.to_expr(),
            value,
            tirx.const(form, "int32"),
        )


_SCALAR, _REGION_VALUE, _SCALAR_OVER_TILE = 0, 1, 2
"""The forms of ``Atomic`` in its encoded call's last argument."""


def _marked(buffer: Any, body: Any) -> Any:
    return tirx.AttrStmt(buffer, ATOMIC_UPDATE, tirx.const(1, "int32"), body)


@register_lowering(Atomic)
def lower_atomic_update(op: TileOp, ctx: LowerContext) -> Any:
    """Generic rule: the plain update under the ``ATOMIC_UPDATE`` marker (module docstring).

    The scalar form's update sits in a one-trip serial loop, which keeps an enclosing
    ``T.Parallel`` loop out of vector lanes: lanes that hit the same element would
    lose updates in a vector scatter. Tile updates touch distinct elements per
    iteration, so they stay vectorizable. Destination elements outside the buffer
    (tail tiles) are skipped.
    """
    assert isinstance(op, Atomic)
    dst = op.dst
    if not op.over_tile:
        idx = list(dst.mins)
        store = tirx.BufferStore(
            dst.buffer, _combine(op.kind, tirx.BufferLoad(dst.buffer, idx), op.value), idx
        )
        once = tirx.For(fresh_vars("a", 1)[0], 0, 1, tirx.ForKind.SERIAL, store)
        return _marked(dst.buffer, once)
    src = op.value if isinstance(op.value, Region) else None
    extents = (src or dst).dense_extents()
    if len(extents) != len(dst.dense_extents()):
        raise ctx.error(
            TileShapeError, f"T.atomic_{op.kind} operands have different numbers of non-unit dims"
        )
    loop_vars = fresh_vars("i", len(extents))
    bind_ranges(ctx.analyzer, loop_vars, extents)
    dst_idx = region_indices(dst, loop_vars)
    conds = [in_bounds(dst, dst_idx, ctx.analyzer)]
    value = op.value
    if src is not None:
        src_idx = region_indices(src, loop_vars)
        value = cast_to(dst.dtype, tirx.BufferLoad(src.buffer, src_idx))
        conds.append(in_bounds(src, src_idx, ctx.analyzer))
    assert isinstance(value, ir.Expr)
    update: Any = tirx.BufferStore(
        dst.buffer, _combine(op.kind, tirx.BufferLoad(dst.buffer, dst_idx), value), dst_idx
    )
    present = [c for c in conds if c is not None]
    if present:
        update = tirx.IfThenElse(present[0] if len(present) == 1 else tirx.And(*present), update, None)
    if not extents:
        # A one-element tile is still a tile operation, done once per block: a one-trip
        # T.Parallel loop gives it to one thread (without a loop every thread would add).
        return _marked(dst.buffer, parallel_nest(fresh_vars("i", 1), [tirx.const(1, "int32")], update))
    return _marked(dst.buffer, parallel_nest(loop_vars, extents, update))
