"""The IR verifier, run by ``run_pipeline`` at entry and exit.

Needs: an ``IRModule``. Guarantees nothing (it only reads); raises ``TileVerifyError``
naming the first broken invariant:

* every function is well formed for TVM (``verify_well_formed``);
* every tile-op call decodes, and each region indexes its buffer with one index per dim;
* after a pipeline (``lowered=True``): no tile-op call, no ``tile.region`` and no
  schedule annotation (``T.Parallel``, ``T.Pipelined``) is left.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..annotations import SCHEDULE_ANNOTATIONS
from ..errors import TileError, TileVerifyError, location_from_span
from ..ops import REGION_OP, decode, op_class_of


def _check_call(call: Any, lowered: bool | None, problems: list[TileVerifyError]) -> None:
    if not isinstance(call.op, ir.Op):
        return
    name = str(call.op.name)
    is_tile = op_class_of(call) is not None or name == REGION_OP
    if not is_tile:
        return
    where = location_from_span(getattr(call, "span", None))
    if lowered:
        problems.append(TileVerifyError(f"tile operator {name} survived lowering", location=where))
        return
    if name == REGION_OP:
        return
    try:
        op = decode(call)
    except TileError as exc:
        problems.append(TileVerifyError(f"malformed {name} call: {exc.message}", location=where))
        return
    for region in [v for v in vars(op).values() if hasattr(v, "mins") and hasattr(v, "buffer")]:
        rank = len(region.buffer.shape)
        if len(region.mins) != rank or len(region.extents) != rank:
            problems.append(
                TileVerifyError(f"{name}: region of {region.buffer.name} has the wrong rank", location=where)
            )


def verify_func(func: Any, name: str, lowered: bool | None) -> None:
    """Verify one ``PrimFunc``; ``lowered=None`` skips the stage-specific checks."""
    problems: list[TileVerifyError] = []

    def on_call(call: Any) -> None:
        _check_call(call, lowered, problems)

    def on_for(loop: Any) -> None:
        if lowered and loop.annotations is not None:
            left = [k for k in loop.annotations if str(k) in SCHEDULE_ANNOTATIONS]
            if left:
                problems.append(TileVerifyError(f"loop {loop.loop_var} still carries {left} after lowering"))

    tvm_ffi.structural_walk(func.body, [(ir.Call, on_call), (tirx.For, on_for)])
    if problems:
        raise problems[0]
    if not tvm.tirx.analysis.verify_well_formed(func, False):
        raise TileVerifyError(f"function {name} is not well formed TIR")


def verify(mod: Any, lowered: bool | None = False) -> Any:
    """Verify every ``PrimFunc`` of ``mod``; returns ``mod`` unchanged."""
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            verify_func(func, gvar.name_hint, lowered)
    return mod
