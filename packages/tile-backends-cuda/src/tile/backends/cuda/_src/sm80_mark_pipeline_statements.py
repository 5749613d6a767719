"""Pass ``mark_pipeline_statements`` (sm_80+, before ``lower_tile_ops``): the cp.async ring's marks.

``T.Pipelined`` on sm_80+ becomes a ``cp.async`` ring with commit/wait groups over three
passes (this one, :mod:`.sm80_pipeline_async_copies`, :mod:`.sm80_lower_async_copies`),
placed in the backend's pipeline lists (``backend.SM80_PIPELINE``, ``backend.SM90A_PIPELINE``).
The schedule is the GPU layer's ring (:mod:`tile.ir.gpu.async_ring`, whose docstring states
what the marks and the ring need and guarantee). This pass wraps the statements of planned
pipelined loops in the ring's marks (``mark_pipelined_loops``) on targets with ``async_copy``.
"""

from __future__ import annotations

from typing import Any

from tile.ir.gpu.async_ring import mark_pipelined_loops
from tile.ir.transform import CompileContext, Pass, Property
from tile.ir.transform.properties import PIPELINE_PLANNED, TILE_OPS


def mark_pipeline_statements(mod: Any, ctx: CompileContext) -> Any:
    """Wrap the statements of pipelined loops (``tile.ir.gpu.async_ring``) where cp.async exists."""
    if not ctx.capabilities.async_copy:
        return mod
    return mark_pipelined_loops(mod)


PIPELINE_STATEMENTS_MARKED = Property(
    "pipeline_statements_marked",
    "every statement of a planned pipelined loop is marked (tile.pipeline_statement, tile.async_copy)",
)
MARK_PIPELINE_STATEMENTS = Pass(
    "mark_pipeline_statements",
    mark_pipeline_statements,
    needs={PIPELINE_PLANNED, TILE_OPS},
    guarantees={PIPELINE_STATEMENTS_MARKED},
)


__all__ = ["MARK_PIPELINE_STATEMENTS", "PIPELINE_STATEMENTS_MARKED", "mark_pipeline_statements"]
