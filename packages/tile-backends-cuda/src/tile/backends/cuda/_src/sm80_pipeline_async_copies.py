"""Pass ``pipeline_async_copies`` (sm_80+, before ``serialize_pipelined_loops``): cp.async rings.

The GPU layer's ring (:mod:`tile.ir.gpu.async_ring`) over the loops
:mod:`.sm80_mark_pipeline_statements` marked; what is CUDA's is how a ring waits
(:class:`CpAsyncSync`): after the step's last producer copy the thread commits one cp.async
group (an empty group when the copies are skipped, so every step commits exactly one), and
each step starts with ``wait_group(c - 1)`` (``c`` the smallest consumer stage: the group of
iteration ``p - c`` is then complete; on sm_90+ a ``fence.proxy.async`` follows, as wgmma
reads shared memory through the async proxy) and a barrier. The copies become ``cp.async``
in :mod:`.sm80_lower_async_copies`.
"""

from __future__ import annotations

from typing import Any

from tile.ir.gpu.async_ring import RingSync, pipeline_rings
from tile.ir.gpu.statements import extern_call as _extern
from tile.ir.target import Target
from tile.ir.transform import CompileContext, Pass, Property
from tile.ir.transform.properties import PIPELINED_LOOPS, TILE_OPS_LOWERED

from ..arch import capabilities, parse_arch
from ..errors import CudaArchError
from .sm80_mark_pipeline_statements import PIPELINE_STATEMENTS_MARKED


class CpAsyncSync(RingSync):
    """cp.async commit/wait_group; on sm_90+ with ``fence.proxy.async`` after each wait."""

    def __init__(self, fence_async_proxy: bool = False) -> None:
        self.fence_async_proxy = fence_async_proxy

    def commit(self) -> list[Any]:
        return [_extern("tile_cp_async_commit")]

    def wait(self, pending: int, newest: Any, trips: Any) -> list[Any]:
        return [_extern(f"tile_cp_async_wait<{pending}>")]

    def after_wait(self) -> list[Any]:
        # the copies are read by wgmma, which goes through the async proxy
        return [_extern("tile_fence_proxy_async")] if self.fence_async_proxy else []


def pipeline_async_copies(mod: Any, ctx: CompileContext) -> Any:
    """Turn marked pipelined loops into cp.async rings (see module docstring)."""
    if not ctx.capabilities.async_copy:
        return mod
    return pipeline_rings(mod, CpAsyncSync(_has_async_proxy(ctx.target)))


def _has_async_proxy(target: Target) -> bool:
    """sm_90+: shared memory the ring fills may be read by wgmma/TMA (the async proxy)."""
    try:
        return target.arch is not None and bool(capabilities(parse_arch(target.arch).name).tma)
    except CudaArchError:
        return False


ASYNC_COPY_RINGS = Property(
    "async_copy_rings", "pipelinable marked loops are cp.async rings over pipeline steps"
)
PIPELINE_ASYNC_COPIES = Pass(
    "pipeline_async_copies",
    pipeline_async_copies,
    needs={PIPELINE_STATEMENTS_MARKED, TILE_OPS_LOWERED, PIPELINED_LOOPS},
    guarantees={ASYNC_COPY_RINGS},
)


__all__ = ["ASYNC_COPY_RINGS", "PIPELINE_ASYNC_COPIES", "CpAsyncSync", "pipeline_async_copies"]
