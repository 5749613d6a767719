"""Pass ``plan_storage``: shared-memory footprint, lifetimes and one merged arena.

Needs: tile IR (tile ops not yet lowered, so their operands are visible) with the
block's shared buffers allocated by ``AllocBuffer`` (scope ``shared*``); pipelined
loops may carry ``tile.pipeline_versioned`` (from ``plan_pipeline``), whose
buffers need ``num_stages`` copies.

Guarantees: every function with shared buffers carries ``tile.shared_arena``
(buffer name -> byte offset) and ``tile.shared_bytes`` (the arena's size). Two
buffers share bytes only if their lifetimes (first to last statement touching
them, widened to whole loops when touched inside one) do not overlap. The IR is
otherwise unchanged. GPU backends place shared buffers at these offsets; the CPU
ignores them. ``storage_plan(func)`` returns the totals (used by resource checks).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.layout import dtype_bits

from ..annotations import NUM_STAGES, PIPELINE_VERSIONED, SHARED_ARENA, SHARED_BYTES
from ..ops.layout_rules import int_shape, is_shared_buffer
from .pipeline import function_pass
from .plan_pipeline import statement_access, view_roots
from .properties import PIPELINE_PLANNED, STORAGE_PLANNED, TILE_OPS

ALIGN_BYTES = 128
"""Arena offsets are multiples of this (wide enough for 128-byte swizzled rows and TMA)."""


@dataclasses.dataclass
class StoragePlan:
    """The shared-memory plan of one function.

    Attributes:
        sizes: bytes of every shared buffer (``num_stages`` copies for versioned ones).
        lifetimes: ``(first, last)`` statement positions of every shared buffer.
        offsets: byte offset of every shared buffer in the arena.
        total_bytes: the arena size after merging.
        unmerged_bytes: the sum of all sizes (what allocating each separately costs).
        symbolic: shared buffers whose size is not a constant (left out of the arena).
    """

    sizes: dict[str, int]
    lifetimes: dict[str, tuple[int, int]]
    offsets: dict[str, int]
    total_bytes: int
    unmerged_bytes: int
    symbolic: list[str]


class _Walker:
    def __init__(self, roots: dict[str, str]) -> None:
        self.roots = roots  # a view's accesses keep the buffer it views alive
        self.position = 0
        self.sizes: dict[str, int] = {}
        self.symbolic: list[str] = []
        self.lifetimes: dict[str, tuple[int, int]] = {}
        self.copies: dict[str, int] = {}

    def touch(self, names: set[str], first: int, last: int) -> None:
        for name in names:
            if name in self.sizes:
                lo, hi = self.lifetimes.get(name, (first, last))
                self.lifetimes[name] = (min(lo, first), max(hi, last))

    def visit(self, stmt: Any) -> set[str]:
        """Walk ``stmt``; returns the buffer names it touches."""
        if isinstance(stmt, tirx.SeqStmt):
            touched: set[str] = set()
            for child in stmt.seq:
                touched |= self.visit(child)
            return touched
        if isinstance(stmt, tirx.AllocBuffer):
            buffer = stmt.buffer
            if is_shared_buffer(buffer):
                shape = int_shape(list(buffer.shape))
                if shape is None:
                    self.symbolic.append(str(buffer.name))
                else:
                    self.sizes[str(buffer.name)] = math.prod(shape) * dtype_bits(str(buffer.dtype)) // 8
            return set()
        if isinstance(stmt, tirx.For | tirx.While | tirx.AttrStmt | tirx.IfThenElse):
            first = self.position
            children = [stmt.body] if not isinstance(stmt, tirx.IfThenElse) else [stmt.then_case]
            if isinstance(stmt, tirx.IfThenElse) and stmt.else_case is not None:
                children.append(stmt.else_case)
            touched = set()
            for child in children:
                touched |= self.visit(child)
            if isinstance(stmt, tirx.For | tirx.While):
                self.touch(touched, first, max(self.position - 1, first))
                self._versioned(stmt)
            return touched
        access = statement_access(stmt, self.roots)
        touched = access.reads | access.writes
        self.touch(touched, self.position, self.position)
        self.position += 1
        return touched

    def _versioned(self, loop: Any) -> None:
        notes = getattr(loop, "annotations", None)
        if notes is None or PIPELINE_VERSIONED not in [str(k) for k in notes]:
            return
        stages = int(notes[NUM_STAGES]) if NUM_STAGES in [str(k) for k in notes] else 1
        for name in notes[PIPELINE_VERSIONED]:
            self.copies[str(name)] = max(self.copies.get(str(name), 1), stages)


def storage_plan(func: Any) -> StoragePlan:
    """Sizes, lifetimes and arena offsets of ``func``'s shared buffers (see module docstring)."""
    walker = _Walker(view_roots(func.body))
    walker.visit(func.body)
    sizes = {name: size * walker.copies.get(name, 1) for name, size in walker.sizes.items()}
    lifetimes = {name: walker.lifetimes.get(name, (0, 0)) for name in sizes}
    placed: list[tuple[int, int, tuple[int, int]]] = []  # (offset, size, lifetime)
    offsets: dict[str, int] = {}
    for name in sorted(sizes, key=lambda n: (-sizes[n], lifetimes[n])):
        life = lifetimes[name]
        busy = sorted(
            (off, size) for off, size, other in placed if other[0] <= life[1] and life[0] <= other[1]
        )
        offset = 0
        for off, size in busy:
            if offset + sizes[name] <= off:
                break
            offset = max(offset, -(-(off + size) // ALIGN_BYTES) * ALIGN_BYTES)
        offsets[name] = offset
        placed.append((offset, sizes[name], life))
    total = max((off + size for off, size, _ in placed), default=0)
    return StoragePlan(sizes, lifetimes, offsets, total, sum(sizes.values()), walker.symbolic)


def _plan_func(func: Any) -> Any:
    """Record the merged shared-memory arena of every function."""
    plan = storage_plan(func)
    if not plan.sizes and not plan.symbolic:
        return func
    # a tile of symbolic size is left to the launch's dynamic shared memory: an arena of
    # the constant-size ones (perhaps empty) still records that the function was planned
    return func.with_attrs({SHARED_ARENA: dict(plan.offsets), SHARED_BYTES: plan.total_bytes})


PLAN_STORAGE = function_pass(
    _plan_func, name="plan_storage", needs={TILE_OPS, PIPELINE_PLANNED}, guarantees={STORAGE_PLANNED}
)
plan_storage = PLAN_STORAGE.run
