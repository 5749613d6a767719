"""Buffer regions as tile-op arguments.

A tile op's call takes each buffer operand as a ``tile.region`` call::

    tile.region(BufferLoad(buf, mins), extent_0, ..., extent_{n-1})

The ``BufferLoad`` names the buffer and the region's corner; the extents follow.
TVM ``Call`` arguments must be expressions, so a region travels in this form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import ir, tirx

from ..errors import TileShapeError, TileTypeError
from .registry import ensure_op

REGION_OP = "tile.region"


def dtype_of(expr: Any) -> str:
    """The element dtype of a TVM expression, as a string."""
    return str(expr.ty)


def is_buffer(value: object) -> bool:
    """Whether ``value`` is a TVM buffer (a ``Var`` of ``BufferType``)."""
    return bool(isinstance(value, ir.Var) and tirx.is_buffer_var(value))


def as_int(expr: object) -> int | None:
    """The Python int of a constant expression, else ``None``."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    return None


@dataclasses.dataclass(frozen=True)
class Region:
    """A rectangular region of a buffer: corner ``mins`` and ``extents`` per dim."""

    buffer: ir.Var
    mins: tuple[ir.Expr, ...]
    extents: tuple[ir.Expr, ...]

    @property
    def dtype(self) -> str:
        return str(self.buffer.dtype)

    @property
    def scope(self) -> str:
        return str(self.buffer.scope())

    @property
    def shape(self) -> tuple[ir.Expr, ...]:
        return tuple(self.buffer.shape)

    @property
    def name(self) -> str:
        return str(self.buffer.name)

    @classmethod
    def full(cls, buffer: ir.Var) -> Region:
        """The whole buffer."""
        shape = tuple(buffer.shape)
        return cls(buffer, tuple(tirx.const(0, "int32") for _ in shape), shape)

    def dense_extents(self) -> list[ir.Expr]:
        """The extents that are not the constant 1 (the shape that is actually copied)."""
        return [e for e in self.extents if as_int(e) != 1]

    def to_expr(self) -> ir.Expr:
        """Encode as a ``tile.region`` call."""
        ensure_op(REGION_OP)
        corner = tirx.BufferLoad(self.buffer, list(self.mins))
        return tirx.call_intrin("handle", REGION_OP, corner, *self.extents)

    @classmethod
    def from_expr(cls, expr: ir.Expr) -> Region:
        """Decode a ``tile.region`` call."""
        if not (isinstance(expr, ir.Call) and isinstance(expr.op, ir.Op) and expr.op.name == REGION_OP):
            raise TileTypeError(f"expected a {REGION_OP} call, got {expr}")
        corner = expr.args[0]
        return cls(corner.source, tuple(corner.indices), tuple(expr.args[1:]))


def region_of(value: object, what: str) -> tuple[Region | None, ir.Var, tuple[ir.Expr, ...]]:
    """Read a user operand: a buffer, a slice ``A[a:b, c:d]`` or a corner ``A[i, j]``.

    Returns ``(region, buffer, corner)``; ``region`` is ``None`` for the corner form,
    whose extents are inferred from the other operand.
    """
    if is_buffer(value):
        assert isinstance(value, ir.Var)
        return Region.full(value), value, ()
    if isinstance(value, ir.TensorRegion):
        buffer = value.source
        mins = tuple(r.min for r in value.region)
        extents = tuple(r.extent for r in value.region)
        return Region(buffer, mins, extents), buffer, mins
    if isinstance(value, ir.TensorLoad):
        return None, value.source, tuple(value.indices)
    raise TileTypeError(
        f"{what} must be a buffer, a slice like A[0:32, 0:32] or a corner like A[i, j]; "
        f"got {type(value).__name__}",
        hint="pass a tensor argument or a buffer from T.alloc_shared / T.alloc_fragment",
    )


def corner_region(
    buffer: ir.Var, corner: Sequence[ir.Expr], other_extents: Sequence[ir.Expr], what: str
) -> Region:
    """Complete a corner operand with extents taken from the other operand.

    The other operand's extents fill the trailing dims; leading extra dims get extent 1
    (``T.copy(A[b, i, j], A_shared)`` with a 2-D ``A_shared`` copies a 1 x M x N box).
    """
    rank = len(buffer.shape)
    if len(corner) != rank:
        raise TileShapeError(
            f"{what} {buffer.name} has rank {rank} but is indexed with {len(corner)} indices",
            hint="give one start index per dimension",
        )
    one = tirx.const(1, "int32")
    if len(other_extents) <= rank:
        extents = [one] * (rank - len(other_extents)) + list(other_extents)
    else:
        dense = [e for e in other_extents if as_int(e) != 1]
        if len(dense) > rank:
            raise TileShapeError(
                f"{what} {buffer.name} has rank {rank}, but the other operand spans {len(dense)} dims",
                hint="index the operand with a slice that names every copied dim",
            )
        extents = [one] * (rank - len(dense)) + dense
    return Region(buffer, tuple(corner), tuple(extents))


def extents_match(a: Sequence[ir.Expr], b: Sequence[ir.Expr]) -> bool | None:
    """Compare the dense extents: ``True``/``False`` when decidable, ``None`` when symbolic."""
    da = [e for e in a if as_int(e) != 1]
    db = [e for e in b if as_int(e) != 1]
    if len(da) != len(db):
        return False
    analyzer = tvm.sym.Analyzer()
    decided = True
    for x, y in zip(da, db, strict=True):
        xi, yi = as_int(x), as_int(y)
        if xi is not None and yi is not None:
            if xi != yi:
                return False
            continue
        if not analyzer.can_prove_equal(x, y):
            decided = False
    return True if decided else None


def format_extents(extents: Sequence[ir.Expr]) -> str:
    return "(" + ", ".join(str(e) for e in extents) + ")"


def check_same_extents(op: str, first: tuple[str, Region], second: tuple[str, Region], hint: str) -> None:
    """Raise ``TileShapeError`` when the two ``(role, region)`` operands of ``op`` provably
    span different dense extents (unit dims aside)."""
    (first_role, a), (second_role, b) = first, second
    if extents_match(a.extents, b.extents) is False:
        raise TileShapeError(
            f"{op} extents differ: {first_role} {a.name} spans {format_extents(a.dense_extents())}, "
            f"{second_role} {b.name} spans {format_extents(b.dense_extents())}",
            hint=hint,
        )


def normalize_dim(op: str, dim: int, rank: int, buffer: ir.Var) -> int:
    """``dim`` of a ``rank``-D ``buffer`` as an axis in ``[0, rank)`` (negative dims count from
    the end); ``TileShapeError`` when it is out of range."""
    axis = dim + rank if dim < 0 else dim
    if not 0 <= axis < rank:
        raise TileShapeError(
            f"{op} dim={dim} is out of range for the {rank}-D buffer {buffer.name}",
            hint=f"use a dim in [{-rank}, {rank - 1}]",
        )
    return axis
