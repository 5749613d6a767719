"""``T.Pipelined`` on gfx90a/gfx942: a multi-stage LDS ring filled by LDS DMA.

The schedule is the GPU layer's async-copy ring (``tile.ir.gpu.async_ring``, which CUDA's
cp.async ring uses too): the
loop's shared tiles get ``num_stages`` copies (a leading stage dim), the copies of
iteration ``k + s - 1`` are issued before iteration ``k`` computes, and each step starts
with a wait and a barrier. Only the waits differ, supplied by :class:`VmcntSync`:

* LDS DMA (``buffer_load_dword ... lds``) completes through the wave's ``vmcnt``, which
  counts instructions in issue order, not groups: there is no commit, and "all but the
  newest ``g`` iterations' copies" is ``s_waitcnt vmcnt(g * per)`` with ``per`` the
  fewest DMA loads any wave issues for one iteration (``lds_dma.dma_ops_per_wave``).
  Any other vector-memory op issued meanwhile only makes that wait stricter.
* In the last steps fewer iterations were issued (nothing is issued past the trip
  count), so a wait with ``g > 0`` is a uniform branch on the step picking the count
  of the iterations actually in flight (``vmcnt(0)`` when none is).

``mark_lds_ring_statements`` (before ``lower_tile_ops``) marks the loops
(``async_ring.mark_pipelined_loops``). ``pipeline_lds_ring`` (before
``serialize_pipelined_loops``) builds the rings where every producer copy of the loop
lowered to LDS DMA, drops the copies' own ``wait_vmem<0>`` (the ring waits for them)
and removes the marks. A loop with a producer that stays on VGPR loads + ``ds_write``
(not DMA-eligible: ``lds_dma.py``) keeps the serialized schedule (load, barrier,
compute, barrier): staging it through registers would need the loads split from the
stores around the compute, which the copy lowering does not expose.

Off: ``num_stages <= 1``, the target option ``lds_ring=0`` (keeps the DMA copies,
serialized), or ``lds_dma=0`` (no DMA, so no ring).

What the device gets (gfx90a, hipcc / LLVM 15, checked in the disassembly): the ring's
``vmcnt(N)`` stays where it is, merged into the barrier's ``s_waitcnt`` (``vmcnt(16)
lgkmcnt(0)`` before ``s_barrier`` for a 3-stage fp16 64x64x32 GEMM), but LLVM 15 also
puts a ``vmcnt(0)`` before the first ``ds_read`` after the DMA loads: it treats an LDS
DMA write as possibly aliasing every LDS read. So each wave waits for the copies it just
issued before it reads the other stage, and only the MFMAs the scheduler interleaves
with the loads overlap them; the ring's structure (one barrier per step, stages that
cannot race) is in place for a compiler that tells the stages apart. The explicit waits
are what the generated source relies on; the emulator (``tile_hip/waitcnt.h``) lands DMA
writes only at them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.errors import TargetError
from tile.ir.gpu.async_ring import ASYNC_COPY, RingSync, pipeline_rings, ring_marking_pass
from tile.ir.target import Target
from tile.ir.transform import CompileContext, Pass, Property
from tile.ir.transform.properties import PIPELINED_LOOPS, TILE_OPS_LOWERED

from .lds_dma import DMA_CALL, dma_ops_per_wave, lds_dma_enabled, wait_vmem, without_vmem_waits

LDS_RING_OPTION = "lds_ring"
"""Target option: ``"0"`` keeps ``T.Pipelined`` loops serialized (``"1"``: the default)."""
MAX_VMCNT = 63
"""gfx9 ``vmcnt`` is 6 bits; a smaller count than the exact one only waits longer."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def lds_ring_enabled(target: Target) -> bool:
    """Whether ``T.Pipelined`` loops may become LDS DMA rings on ``target``.

    Raises:
        TargetError: the ``lds_ring`` option is not a switch.
    """
    value = target.option(LDS_RING_OPTION)
    text = "1" if value is None else str(value).strip().lower()
    if text not in _TRUE + _FALSE:
        raise TargetError(
            f"target option {LDS_RING_OPTION}={value!r} is not a switch",
            hint=f'write {{"{LDS_RING_OPTION}": "1"}} or {{"{LDS_RING_OPTION}": "0"}}',
        )
    return text in _TRUE and lds_dma_enabled(target)


def _unmarked(stmt: Any) -> Any:
    if isinstance(stmt, tirx.AttrStmt) and str(stmt.attr_key) == ASYNC_COPY:
        return stmt.body
    return stmt


def _hidden_from_barrier_planner(stmt: Any) -> Any:
    """The DMA calls' LDS pointers with an empty access mask.

    The ring orders its DMA writes itself (a wait and a barrier before a stage is read or
    refilled). Seen as writes, they would make TVM's barrier planner put a
    ``__syncthreads`` between the issue and the compute of the other stage (it cannot
    tell the stages apart), and on gfx90a that barrier waits ``vmcnt(0)``: no overlap.
    """

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern"):
            return call
        if str(call.args[0].value) != DMA_CALL:
            return call
        lds = call.args[1]
        args = list(lds.args)
        args[4] = tirx.const(0, "int32")  # tvm_access_ptr(type, data, offset, extent, rw_mask)
        hidden = ir.Call(lds.op, args, span=lds.span, ret_ty=lds.ty)
        return ir.Call(call.op, [call.args[0], hidden, *call.args[2:]], span=call.span, ret_ty=call.ty)

    return tvm_ffi.structural_map(stmt, (ir.Call, on_call))


class VmcntSync(RingSync):
    """The ring's waits as ``tile::wait_vmem<N>()`` (``s_waitcnt vmcnt(N)``), no commit.

    ``accepts`` records the loop's DMA loads per iteration, which the ``wait`` calls of
    the same loop read (``_pipeline_loop`` asks ``accepts`` before any wait).
    """

    def __init__(self) -> None:
        self.per_iteration = 0

    def accepts(self, producers: Sequence[Any]) -> bool:
        counts = [dma_ops_per_wave(_unmarked(p)) for p in producers]
        if any(c is None for c in counts):
            return False  # a producer on VGPR loads: the loop stays serialized
        self.per_iteration = sum(c for c in counts if c is not None)
        return True

    def producer(self, stmt: Any) -> Any:
        return _hidden_from_barrier_planner(without_vmem_waits(_unmarked(stmt)))

    def commit(self) -> list[Any]:
        return []

    def wait(self, pending: int, newest: Any, trips: Any) -> list[Any]:
        if pending == 0 or newest is None or self.per_iteration == 0:
            return [wait_vmem(0)]
        # iterations newest - pending + 1 .. newest may be in flight; those past the trip
        # count were never issued, so the count shrinks in the last steps
        stmt: Any = wait_vmem(0)
        for groups in range(1, pending + 1):
            issued = newest - (pending - groups) < trips
            stmt = tirx.IfThenElse(issued, wait_vmem(min(groups * self.per_iteration, MAX_VMCNT)), stmt)
        return [stmt]


def pipeline_lds_ring(mod: Any, ctx: CompileContext) -> Any:
    """Marked loops whose producers are all LDS DMA become rings (see module docstring)."""
    return pipeline_rings(mod, VmcntSync()) if lds_ring_enabled(ctx.target) else mod


LDS_RING_STATEMENTS_MARKED = Property(
    "lds_ring_statements_marked",
    "where rings are on, every statement of a planned pipelined loop is marked, producers too",
)
MARK_LDS_RING_STATEMENTS = ring_marking_pass(
    "mark_lds_ring_statements", lambda ctx: lds_ring_enabled(ctx.target), LDS_RING_STATEMENTS_MARKED
)
"""Marks pipelined loops' statements and producer copies (the ring's marks) where rings are on."""
LDS_RINGS = Property("lds_rings", "marked loops whose producers are all LDS DMA are rings with vmcnt waits")
PIPELINE_LDS_RING = Pass(
    "pipeline_lds_ring",
    pipeline_lds_ring,
    needs={LDS_RING_STATEMENTS_MARKED, TILE_OPS_LOWERED, PIPELINED_LOOPS},
    guarantees={LDS_RINGS},
)
