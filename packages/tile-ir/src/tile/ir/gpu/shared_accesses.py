"""Shared-memory accesses as the barrier plan (:mod:`tile.ir.gpu.barriers`) records them.

An :class:`Access` is one read, write or barrier of a statement, an :class:`Entry` one
statement and its accesses; :func:`static_lifetimes` gives the span of statements in which
each static ``shared`` buffer is live (TVM's StorageRewrite may give buffers of disjoint
spans the same bytes, so the plan counts them as one memory).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from .store_owners import Reach

READ, WRITE, SYNC, FENCE = "read", "write", "sync", "fence"
RANGE_SYNC = "range sync"
"""Access kinds; a fence is a barrier on some paths only (inside a block-uniform ``if``): the
accesses after it are ordered after everything before (where they run, it ran), but it
orders nothing that follows the ``if`` (on the other path it did not run). A range sync
(:data:`~tile.ir.gpu.barriers.THREAD_RANGE_SYNC`) orders the accesses of the statement list it
stands in, all run by the range's threads, and nothing outside it: the statements around the
condition see none."""


@dataclasses.dataclass(frozen=True)
class Access:
    """One read, write or barrier of a statement (``kind``: :data:`READ` ... :data:`RANGE_SYNC`)."""

    kind: str
    memory: Any = None
    """The data variable accessed (by hash; ``barriers._Planner._aliases`` says which may overlap)."""
    index: Any = None
    """The flattened element index, or None where the access covers a range."""
    thread: Any = None
    """The innermost thread variable at the access (TVM's rule: the last one launched)."""
    atomic: str | None = None
    """The callee of an atomic read-modify-write (``tile::atomic_add``); two atomics of one kind
    on the same memory need no barrier between them: they commute, in whatever order threads reach
    them (a reducer's updates from every thread of the block, loop after loop)."""
    reach: Reach | None = None
    """For a store: the elements it reaches, for :meth:`barriers._Planner._overwrites` (None for a
    write through a pointer, or a store that cannot be enumerated)."""
    pointer: bool = False
    """A write through a pointer (``cp.async``, ``stmatrix``, an LDS DMA): where it lands is
    known, which thread's bytes land where is not."""
    element: Any = None
    """For a store: the element it names (its indices, vector lanes included), compared as TVM
    compares ``index``: a thread storing again to what it named before needs no barrier (the
    loop-carried check of a vectorized copy)."""


@dataclasses.dataclass
class Entry:
    """A statement and its accesses, in the order the plan walks them."""

    stmt: Any
    accesses: list[Access]


def writes_through(call: Any) -> bool:
    """An atomic (``tile::atomic_add(&S[i], v)``, ``atomicOr(&S[i], v)``) updates the element
    its first argument points to: ``address_of`` alone reads as a load of it."""
    callee = str(call.args[0].value) if isinstance(call.args[0], ir.StringImm) else ""
    target = call.args[1] if len(call.args) > 1 else None
    return (
        callee.startswith(("tile::atomic_", "atomic"))
        and isinstance(target, ir.Call)
        and isinstance(target.op, ir.Op)
        and str(target.op.name) == "tirx.address_of"
        and isinstance(target.args[0], ir.TensorLoad)
    )


def buffer_key(buffer: Any) -> int:
    """A buffer's identity: ``buffer.data`` is a fresh ``buffer_data(buffer)`` call at each use,
    so the buffer object (the argument of such a call, in ``tvm_access_ptr``) is the key."""
    if (
        isinstance(buffer, ir.Call)
        and isinstance(buffer.op, ir.Op)
        and str(buffer.op.name) == "tirx.buffer_data"
    ):
        buffer = buffer.args[0]
    return hash(buffer)


def const_int(expr: Any) -> int | None:
    """``expr``'s value when it is an integer constant."""
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def strides_of(buffer: Any) -> list[Any]:
    """``buffer``'s strides in elements (row-major from its shape where it declares none)."""
    strides = list(buffer.strides)
    if not strides:
        run = tirx.const(1, "int32")
        for extent in reversed(list(buffer.shape)):
            strides.insert(0, run)
            run = run * extent
    return strides


def scope_of(data: Any) -> str:
    """The storage scope of a data variable (``global`` where it has no pointer type)."""
    ty = getattr(data, "ty", None)
    return str(ty.storage_scope) if isinstance(ty, ir.PointerType) else "global"


def _static_shared_touched(node: Any) -> set[int]:
    found: set[int] = set()

    def note(buffer: Any, data: Any) -> None:
        if scope_of(data) == "shared":
            found.add(buffer_key(buffer))

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.tvm_access_ptr":
            note(call.args[1], call.args[1])

    def on_load(load: Any) -> None:
        note(load.source, load.source.data)

    def on_store(store: Any) -> None:
        note(store.buffer, store.buffer.data)

    tvm_ffi.structural_walk(
        node, [(ir.TensorLoad, on_load), (ir.Call, on_call), (tirx.BufferStore, on_store)]
    )
    return found


def static_lifetimes(body: Any) -> dict[int, tuple[int, int, int]]:
    """Static shared buffer (data variable hash) -> (its statement list, first, last statement).

    The lifetime TVM's StorageRewrite gives a buffer: the span of statements, in the list
    that holds its allocation, that touch it (a loop counts whole). Two buffers of one list
    whose spans do not overlap may get the same bytes from it; no others do.
    """
    lifetimes: dict[int, tuple[int, int, int]] = {}

    def on_seq(seq: Any) -> None:
        children = list(seq.seq)
        allocated = {
            buffer_key(c.buffer)
            for c in children
            if isinstance(c, tirx.AllocBuffer) and scope_of(c.buffer.data) == "shared"
        }
        if not allocated:
            return
        spans: dict[int, tuple[int, int]] = {}
        for i, child in enumerate(children):
            for data in _static_shared_touched(child) & allocated:
                first, last = spans.get(data, (i, i))
                spans[data] = (min(first, i), max(last, i))
        for data, (first, last) in spans.items():
            lifetimes[data] = (hash(seq), first, last)

    tvm_ffi.structural_walk(body, (tirx.SeqStmt, on_seq))
    return lifetimes


def fenced(accesses: list[Access]) -> list[Access]:
    """``accesses`` of a block-uniform branch, its barriers made fences (see ``FENCE``)."""
    return [Access(FENCE) if a.kind == SYNC else a for a in accesses]
