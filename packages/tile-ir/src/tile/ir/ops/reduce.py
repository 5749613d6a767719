"""``T.reduce_sum/max/min/abssum/absmax``: reduce a tile along one dimension.

NaN, on every backend: a plain float ``max``/``min``/``absmax`` skips NaN, as TileLang
documents for ``nan_propagate=False`` (CUDA's ``fmaxf``/``__hmax`` return the other
operand): a NaN in the source or, with ``clear=False``, in the destination's old value
counts as the identity (``-inf``, ``+inf``, ``0``), so a row of NaN gives the identity
(``np.fmax.reduce(row, initial=-inf)``). ``nan_propagate=True`` (the ``*_nan`` kinds)
gives NaN when any value is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import ir, tirx

from tile.layout import Fragment, make_fully_replicated

from ..errors import TileShapeError, TileTypeError
from .base import LowerContext, TileOp, tile_op
from .layout_rules import int_shape, is_fragment_buffer, linear_fragment, project_fragment, region_is_whole
from .loops import bind_ranges, cast_to, fresh_vars, parallel_nest
from .region import Region, as_int, extents_match, format_extents, normalize_dim, region_of
from .registry import register_lowering

REDUCE_KINDS = (
    "sum",
    "max",
    "min",
    "abssum",
    "absmax",
    "bitand",
    "bitor",
    "bitxor",
    "max_nan",
    "min_nan",
    "absmax_nan",
)
BITWISE_KINDS = ("bitand", "bitor", "bitxor")
"""Reductions of integer tiles by ``&``, ``|`` and ``^``."""
NAN_KINDS = ("max_nan", "min_nan", "absmax_nan")
"""``max``/``min``/``absmax`` whose result is NaN when a value is (``nan_propagate=True``);
the plain kinds skip NaN (module docstring)."""


def base_kind(kind: str) -> str:
    """The kind without its NaN handling: ``"absmax_nan"`` -> ``"absmax"``."""
    return kind.removesuffix("_nan")


def infinity(dtype: str) -> ir.Expr:
    """+inf of a float ``dtype``; TVM makes none for bfloat16, whose +inf is float32's, cast."""
    try:
        return tirx.infinity(dtype)
    except tvm.error.InternalError:
        return tirx.FloatImm(dtype, float("inf"))


def reduce_identity(kind: str, dtype: str) -> ir.Expr:
    """The value a ``T.reduce_<kind>`` with ``clear=True`` starts from."""
    kind = base_kind(kind)
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return tirx.const(0, dtype)
    if kind == "bitand":
        return tirx.bitwise_not(tirx.const(0, dtype))  # every bit set
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        # -inf/+inf as in TileLang: a row of -inf (a fully masked attention row) has max -inf
        return -infinity(dtype) if kind == "max" else infinity(dtype)
    return tirx.min_value(dtype) if kind == "max" else tirx.max_value(dtype)


_identity = reduce_identity


def _combine(kind: str, acc: ir.Expr, value: ir.Expr) -> ir.Expr:
    base = base_kind(kind)
    if base in ("abssum", "absmax"):
        value = tirx.abs(value)
    if base in ("sum", "abssum"):
        return acc + value
    if base in BITWISE_KINDS:
        return getattr(tirx, f"bitwise_{base.removeprefix('bit')}")(acc, value)
    if not str(acc.ty).startswith(("float", "bfloat")):
        return tirx.max(acc, value) if base in ("max", "absmax") else tirx.min(acc, value)
    if kind in NAN_KINDS:  # NaN if either is (their sum is)
        folded = tirx.max(acc, value) if base in ("max", "absmax") else tirx.min(acc, value)
        return tirx.Select(tirx.Or(_isnan(acc), _isnan(value)), acc + value, folded)
    return skip_nan(base, acc, value)


def skip_nan(kind: str, acc: ir.Expr, value: ir.Expr) -> ir.Expr:
    """``max``/``min`` of a float ``acc`` and ``value`` that keeps ``acc`` where ``value`` is NaN.

    The value comes first: code generators lower ``max(a, b)`` as ``a > b ? a : b``
    (LLVM's select, which x86 ``maxps`` implements; TVM's CUDA and HIP ``half`` max), so
    a NaN ``a`` loses the comparison and ``b`` is kept, while CUDA's float ``fmaxf`` skips
    NaN on either side. A NaN therefore never reaches an accumulator that started from a
    number, with no select beyond the one ``max`` already is (extra selects in every
    combine made MLA decode spill registers on sm_80).
    """
    return tirx.max(value, acc) if kind in ("max", "absmax") else tirx.min(value, acc)


def reduce_start(kind: str, old: ir.Expr) -> ir.Expr:
    """What a ``clear=False`` reduction folds in from the destination's ``old`` value.

    A plain float ``max``/``min``/``absmax`` counts a NaN as its identity wherever it is, so
    a NaN already in the destination becomes the identity (one select per row, not per
    element). ``absmax`` starts from ``max(old, 0)``: the rules that fold partials started
    at 0 give that for a row of NaN, and with any number in the row it changes nothing.
    Every other kind folds ``old`` in as it is.
    """
    if kind not in ("max", "min", "absmax") or not str(old.ty).startswith(("float", "bfloat")):
        return old
    identity = reduce_identity(kind, str(old.ty))
    start = tirx.Select(_isnan(old), identity, old)
    return tirx.max(start, identity) if kind == "absmax" else start


def _isnan(value: ir.Expr) -> ir.Expr:
    """``isnan``; TVM has none for bfloat16, whose values float32 holds exactly."""
    return tirx.isnan(value if str(value.ty).startswith("float") else tirx.Cast("float32", value))


reduce_identity = _identity
"""``(kind, dtype) -> the value a reduction starts from`` (for backends' own rules)."""
reduce_combine = _combine
"""``(kind, acc, value) -> acc folded with value`` (for backends' own rules)."""


@tile_op
class Reduce(TileOp):
    """``dst[...] = reduce(src[..., r, ...] for r)`` along ``dim`` (``dst`` drops that dim).

    With ``clear=False`` the reduction also folds in ``dst``'s current values.
    """

    op_name = "tile.reduce"

    def __init__(self, kind: str, src: Region, dst: Region, dim: int, clear: bool) -> None:
        self.kind, self.src, self.dst, self.dim, self.clear = kind, src, dst, dim, clear

    @classmethod
    def build(cls, kind: str, src: object, dst: object, dim: int, clear: bool) -> Reduce:
        """Check ranks and extents and make the op."""
        if kind not in REDUCE_KINDS:
            raise TileTypeError(f"unknown reduction {kind!r}", hint=f"use one of {', '.join(REDUCE_KINDS)}")
        src_region, src_buf, _ = region_of(src, "reduce source")
        dst_region, dst_buf, _ = region_of(dst, "reduce destination")
        if src_region is None or dst_region is None:
            raise TileTypeError(
                "T.reduce_* operands must be whole buffers or slices, not single elements",
                hint="pass the fragment itself, e.g. T.reduce_max(S, m, dim=1)",
            )
        if kind in NAN_KINDS and not str(src_buf.dtype).startswith(("float", "bfloat")):
            kind = base_kind(kind)  # integers have no NaN
        if kind in BITWISE_KINDS and not str(src_buf.dtype).startswith(("int", "uint")):
            raise TileTypeError(
                f"T.reduce_{kind} of {src_buf.name}: {src_buf.dtype} has no bitwise operations",
                hint="reduce an integer tile, or T.reinterpret the values as integers first",
            )
        axis = normalize_dim("reduce", dim, len(src_region.extents), src_buf)
        kept = [e for d, e in enumerate(src_region.extents) if d != axis]
        if extents_match(kept, dst_region.extents) is False:
            raise TileShapeError(
                f"T.reduce_{kind}: {dst_buf.name} "
                f"spans {format_extents(dst_region.dense_extents())} "
                f"but reducing {src_buf.name} {format_extents(src_region.extents)} "
                f"along dim {dim} leaves {format_extents(kept)}",
                hint="the destination has the source's shape with the reduced dim removed",
            )
        return cls(kind, src_region, dst_region, axis, bool(clear))

    @classmethod
    def decode(cls, call: ir.Call) -> Reduce:
        kind = REDUCE_KINDS[as_int(call.args[2]) or 0]
        dim = as_int(call.args[3])
        clear = bool(as_int(call.args[4]))
        return cls(kind, Region.from_expr(call.args[0]), Region.from_expr(call.args[1]), dim or 0, clear)

    def infer_layout(self, ctx: LowerContext) -> Mapping[str, Any]:
        """Level 2: the destination fragment is the source's with ``dim`` dropped.

        Each kept element is replicated on every thread that holds part of its row
        (those threads combine their partial results), condensed to distinct owners.
        """
        src, dst = self.src, self.dst
        if not (is_fragment_buffer(src.buffer) and is_fragment_buffer(dst.buffer)):
            return {}
        if not (region_is_whole(src) and region_is_whole(dst)) or src.name not in ctx.layouts:
            return {}
        shape = int_shape(list(src.extents))
        src_layout = ctx.layouts[src.name]
        if shape is None or not isinstance(src_layout, Fragment):
            return {}
        kept = [d for d in range(len(shape)) if d != self.dim]
        dst_shape = int_shape(list(dst.extents))
        if not kept and dst_shape is not None and all(e == 1 for e in dst_shape):
            # a full reduction of a 1-D fragment into one element: every thread that holds
            # part of the source combines the partials and ends with the result, so the
            # element is on all of them (a later T.Parallel may read s[0] on any thread)
            holders = as_int(src_layout.get_thread_size()) or 1
            one = linear_fragment(dst_shape, 1) if holders == 1 else make_fully_replicated(dst_shape, holders)
            return {dst.name: one}
        if dst_shape != [shape[d] for d in kept]:
            return {}
        return {dst.name: project_fragment(src_layout, shape, kept)}

    def encode(self) -> ir.Call:
        consts = [REDUCE_KINDS.index(self.kind), self.dim, int(self.clear)]
        return tirx.call_intrin(
            "handle",
            self.op_name,
            self.src.to_expr(),
            self.dst.to_expr(),
            *(tirx.const(c, "int32") for c in consts),
        )


@register_lowering(Reduce)
def lower_reduce_loops(op: TileOp, ctx: LowerContext) -> Any:
    """Generic rule: a ``T.Parallel`` nest over the kept dims, a serial loop over the reduced one."""
    assert isinstance(op, Reduce)
    kept = [e for d, e in enumerate(op.src.extents) if d != op.dim]
    out_vars = fresh_vars("i", len(kept))
    r = fresh_vars("r", 1)[0]
    bind_ranges(ctx.analyzer, [*out_vars, r], [*kept, op.src.extents[op.dim]])
    src_idx = []
    it = iter(out_vars)
    for d, lo in enumerate(op.src.mins):
        src_idx.append(lo + (r if d == op.dim else next(it)))
    dst_idx = []
    kept_dense = [v for v, e in zip(out_vars, kept, strict=True) if as_int(e) != 1]
    dense_out = iter(kept_dense)
    for lo, e in zip(op.dst.mins, op.dst.extents, strict=True):
        dst_idx.append(lo if as_int(e) == 1 else lo + next(dense_out))
    acc = op.dst.dtype
    current = tirx.BufferLoad(op.dst.buffer, dst_idx)
    value = cast_to(acc, tirx.BufferLoad(op.src.buffer, src_idx))
    fold = tirx.BufferStore(op.dst.buffer, _combine(op.kind, current, value), dst_idx)
    body = [tirx.For(r, 0, op.src.extents[op.dim], tirx.ForKind.SERIAL, fold)]
    start = _identity(op.kind, acc) if op.clear else reduce_start(op.kind, current)
    if not start.same_as(current):
        body.insert(0, tirx.BufferStore(op.dst.buffer, start, dst_idx))
    return parallel_nest(out_vars, kept, tirx.SeqStmt(body) if len(body) > 1 else body[0])
