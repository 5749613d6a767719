"""Pass ``mark_pipeline_statements`` (sm_80+, before ``lower_tile_ops``): the cp.async ring's marks.

``T.Pipelined`` on sm_80+ becomes a ``cp.async`` ring with commit/wait groups over three
passes (this one, :mod:`.sm80_pipeline_async_copies`, :mod:`.sm80_lower_async_copies`),
placed in the backend's pipeline lists (``backend.SM80_PIPELINE``, ``backend.SM90A_PIPELINE``).
The schedule is the GPU layer's ring (:mod:`tile.ir.gpu.async_ring`, whose docstring states
what the marks and the ring need and guarantee). This pass wraps the statements of planned
pipelined loops in the ring's marks (``mark_pipelined_loops``) on targets with ``async_copy``.
"""

from __future__ import annotations

from tile.ir.gpu.async_ring import ring_marking_pass
from tile.ir.transform import Property

PIPELINE_STATEMENTS_MARKED = Property(
    "pipeline_statements_marked",
    "every statement of a planned pipelined loop is marked (tile.pipeline_statement, tile.async_copy)",
)
MARK_PIPELINE_STATEMENTS = ring_marking_pass(
    "mark_pipeline_statements", lambda ctx: ctx.capabilities.async_copy, PIPELINE_STATEMENTS_MARKED
)
"""Wraps the statements of pipelined loops (``tile.ir.gpu.async_ring``) where cp.async exists."""


__all__ = ["MARK_PIPELINE_STATEMENTS", "PIPELINE_STATEMENTS_MARKED"]
