"""The IR verifier, run by ``run_pipeline`` at entry and exit.

Needs: an ``IRModule``. Guarantees nothing (it only reads); raises ``TileVerifyError``
naming the first broken invariant:

* every function is well formed for TVM (``verify_well_formed``);
* every tile-op call decodes, and each region indexes its buffer with one index per dim;
* after a pipeline (``lowered=True``): no tile-op call, no ``tile.region`` and no
  schedule annotation (``T.Parallel``, ``T.Pipelined``) is left.

``check_stage`` is what ``run_pipeline`` calls: a failure there is the compiler's bug,
not the user's, and the error says so, names the pass that produced the bad IR (found
by replaying the pipeline with a check after every pass), the kernel line, and what to
attach to a report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from .. import env
from ..annotations import KERNEL_SOURCE, SCHEDULE_ANNOTATIONS
from ..errors import SourceLocation, TileError, TileVerifyError, location_from_span
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
        detail = _well_formed_detail(func)
        raise TileVerifyError(f"function {name} is not well formed TIR" + (f": {detail}" if detail else ""))


def _well_formed_detail(func: Any) -> str:
    """TVM's own reason a function is not well formed (its first line), or ``""``."""
    try:
        tvm.tirx.analysis.verify_well_formed(func, True)
    except Exception as exc:  # TVM raises its InternalError / ValueError with the reason
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and "TVM_BACKTRACE" not in ln]
        return lines[-1] if lines else ""
    return ""


def _kernel_location(mod: Any) -> SourceLocation | None:
    for func in mod.functions.values():
        attrs = getattr(func, "attrs", None)
        if attrs is not None and KERNEL_SOURCE in attrs:
            filename, line = str(attrs[KERNEL_SOURCE]).rsplit(":", 1)
            return SourceLocation.from_file(filename, int(line))
    return None


def compiler_bug(error: TileVerifyError, produced_by: str, mod: Any) -> TileVerifyError:
    """``error`` restated as the compiler bug it is: who produced the IR, where, what to report."""
    dump_dir = env.DUMP_IR.get()
    attach = (
        f"the kernel's source and the IR dump folder {dump_dir}"
        if dump_dir
        else "the kernel's source and the folder written by running again with TILE_DUMP_IR=<folder> "
        "(every stage's IR)"
    )
    return TileVerifyError(
        f"internal compiler error: {produced_by} produced invalid IR: {error.message}",
        hint=f"this is a bug in tile, not in your kernel; please report it and attach {attach}",
        location=error.location or _kernel_location(mod),
    )


def first_bad_pass(mod: Any, passes: Sequence[Any], ctx: Any) -> str | None:
    """Replay ``passes`` on ``mod``, verifying after each; the first one whose output fails."""
    try:
        for step in passes:
            mod = step(mod, ctx)
            try:
                verify(mod, lowered=None)
            except TileVerifyError:
                return str(step.name)
    except Exception:  # the replay is best effort: the original error is reported either way
        return None
    return None


def check_stage(
    mod: Any, lowered: bool | None, produced_by: str, locate: Callable[[], str | None] | None = None
) -> None:
    """Verify ``mod``; on failure raise ``compiler_bug`` naming ``produced_by`` (or the pass
    ``locate`` finds)."""
    try:
        verify(mod, lowered)
    except TileVerifyError as exc:
        culprit = locate() if locate is not None else None
        raise compiler_bug(exc, f"pass {culprit!r}" if culprit else produced_by, mod) from None


def verify(mod: Any, lowered: bool | None = False) -> Any:
    """Verify every ``PrimFunc`` of ``mod``; returns ``mod`` unchanged."""
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            verify_func(func, gvar.name_hint, lowered)
    return mod
