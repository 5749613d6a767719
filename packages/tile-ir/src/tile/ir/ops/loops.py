"""Helpers shared by the generic lowering rules: loop nests, indices, bounds predicates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import LOOP_FRAGMENT, PARALLEL_LOOP
from .region import Region, as_int


def fresh_vars(prefix: str, count: int) -> list[ir.Var]:
    """``count`` new int32 loop variables named ``prefix0, prefix1, ...``."""
    return [tirx.Var(f"{prefix}{k}", "int32") for k in range(count)]


def bind_ranges(analyzer: Any, loop_vars: Sequence[ir.Var], extents: Sequence[ir.Expr]) -> None:
    """Tell ``analyzer`` that each loop var ranges over ``[0, extent)``."""
    for var, extent in zip(loop_vars, extents, strict=True):
        analyzer.bind(var, ir.Range(0, extent))


def region_indices(region: Region, dense_vars: Sequence[ir.Var]) -> list[ir.Expr]:
    """Indices into ``region.buffer``: ``min + var`` on dense dims, ``min`` on unit dims."""
    out: list[ir.Expr] = []
    it = iter(dense_vars)
    for lo, extent in zip(region.mins, region.extents, strict=True):
        out.append(lo if as_int(extent) == 1 else lo + next(it))
    return out


def in_bounds(region: Region, indices: Sequence[ir.Expr], analyzer: Any) -> ir.Expr | None:
    """The predicate ``index < shape`` for dims the analyzer cannot prove in bounds.

    ``None`` means every access is provably inside the buffer, so no guard is needed.
    """
    conds = []
    for index, size in zip(indices, region.shape, strict=True):
        if not analyzer.can_prove(index < size):
            conds.append(index < size)
    if not conds:
        return None
    pred = conds[0]
    for cond in conds[1:]:
        pred = tirx.And(pred, cond)
    return pred


def parallel_nest(loop_vars: Sequence[ir.Var], extents: Sequence[ir.Expr], body: Any) -> Any:
    """Wrap ``body`` in ``T.Parallel`` loops (serial ``For`` + the parallel annotation)."""
    stmt = body
    for var, extent in reversed(list(zip(loop_vars, extents, strict=True))):
        stmt = tirx.For(var, 0, extent, tirx.ForKind.SERIAL, stmt, annotations={PARALLEL_LOOP: 1})
    return stmt


def serial_nest(stmt: Any) -> Any:
    """``stmt`` with the ``T.Parallel`` notes of its loops (the parallel mark and any thread
    binding layout) dropped: plain loops every thread runs."""
    dropped = (PARALLEL_LOOP, LOOP_FRAGMENT)

    def on_for(loop: Any) -> Any:
        if loop.annotations is None or not any(str(k) in dropped for k in loop.annotations):
            return loop
        notes = {str(k): v for k, v in loop.annotations.items() if str(k) not in dropped}
        return tirx.For(
            loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, notes
        )

    return tvm_ffi.structural_map(stmt, (tirx.For, on_for))


def serial_loop(var: ir.Var, extent: ir.Expr, body: Any) -> Any:
    return tirx.For(var, 0, extent, tirx.ForKind.SERIAL, body)


def cast_to(dtype: str, value: ir.Expr) -> ir.Expr:
    """``value`` converted to ``dtype`` (no node when the dtype already matches)."""
    if str(value.ty) == dtype:
        return value
    return tirx.Cast(dtype, value)
