"""Pass ``serialize_pipelined_loops``: run ``T.Pipelined`` loops in program order.

For targets without asynchronous copies (the CPU), where a plain serial loop is
exactly the loop's meaning. Needs: pipelined loops carrying the ``tile.pipelined``
annotation (plus ``tile.num_stages`` / order / stage). Guarantees: those loops are
``serial`` and carry none of the pipeline annotations.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

from ..annotations import NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINED_LOOP, has_annotation
from .pipeline import function_pass
from .properties import PIPELINED_LOOPS, PIPELINED_LOOPS_SCHEDULED
from .vectorize_parallel_loops import without

_KEYS = (PIPELINED_LOOP, NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE)


def _serialize(func: Any) -> Any:
    """Strip the pipeline annotations, leaving serial loops (see module docstring)."""

    def on_for(loop: Any) -> Any:
        if not has_annotation(loop, PIPELINED_LOOP):
            return loop
        return tirx.For(
            loop.loop_var,
            loop.min,
            loop.extent,
            tirx.ForKind.SERIAL,
            loop.body,
            None,
            without(loop.annotations, _KEYS),
        )

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, on_for)))


SERIALIZE_PIPELINED_LOOPS = function_pass(
    _serialize, name="serialize_pipelined_loops", needs={PIPELINED_LOOPS},
    guarantees={PIPELINED_LOOPS_SCHEDULED}, invalidates={PIPELINED_LOOPS})  # fmt: skip
serialize_pipelined_loops = SERIALIZE_PIPELINED_LOOPS.run
