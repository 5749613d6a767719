"""Pass ``serialize_block_grid``: run a kernel's blocks as one parallel host loop.

For targets without a hardware grid (the CPU). Needs: the grid as ``thread_extent``
attributes on ``blockIdx.*`` / ``threadIdx.*``. Guarantees: no ``thread_extent``
is left; the blocks ``(bx, by, bz)`` become one ``parallel`` loop over
``gx * gy * gz`` iterations with ``bx = b % gx``, ``by = b // gx % gy``, ...; the
block's on-chip buffers (shared, fragment, local) are allocated inside the loop, so
each block owns its copy; ``threads=`` starts no OS threads. A kernel that reads its
thread id is rejected with ``UnsupportedOnTargetError`` at the line that reads it.

Atomics: the LLVM code generator has no atomic read-modify-write, so the
``ATOMIC_UPDATE`` markers left by the generic atomic lowering (and by ``lower_host_atomics``
for a thread's value-returning atomics) are removed here, and a
kernel with such an update on a buffer other blocks can see (global memory) runs its
blocks in a ``serial`` loop instead: correct by construction, without parallelism
across blocks. Atomics on block-local buffers keep the parallel loop.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..annotations import THREAD_ID_READS, THREAD_LEVEL_CALLS
from ..errors import SourceLocation, UnsupportedOnTargetError
from ..ops.atomic import ATOMIC_UPDATE, is_cross_block
from ._traverse import mutate
from .pipeline import function_pass
from .properties import BLOCK_GRID, GRID_SERIALIZED, TILE_OPS_LOWERED


def _uses(body: Any, var: Any) -> bool:
    hit = tvm_ffi.structural_walk(
        body, (ir.Var, lambda v: tvm_ffi.VisitInterrupt(True) if v.same_as(var) else None)
    )
    return bool(hit is not None and getattr(hit, "value", hit) is True)


def first_location(func: Any, attr: str = THREAD_ID_READS) -> SourceLocation | None:
    reads = func.attrs.get(attr) if func.attrs is not None else None
    if not reads:
        return None
    filename, line, column = str(reads[0]).rsplit(":", 2)
    return SourceLocation.from_file(filename, int(line), int(column))


def _serialize(func: Any) -> Any:
    """Turn every kernel's block grid into a parallel loop (see module docstring)."""
    call = first_location(func, THREAD_LEVEL_CALLS)
    if call is not None:
        raise UnsupportedOnTargetError(
            "this kernel makes an expert-tier GPU call (an mbarrier, a wgmma wait or fence, a warp "
            "shuffle or vote, a TMA load, register reallocation...), which the CPU backend does not run",
            hint="compile it for a CUDA target (TILE_DEVICE=emu runs it on the CPU emulator), or use "
            "tile operators, which the CPU backend runs",
            location=call,
        )
    blocks: list[tuple[str, Any, Any]] = []
    cross_block_atomics: list[Any] = []

    def on_attr(node: Any, m: Any) -> Any:
        if str(node.attr_key) == ATOMIC_UPDATE:
            if is_cross_block(node.node):
                cross_block_atomics.append(node.node)
            return m.mutate(node.body)
        if str(node.attr_key) != "thread_extent":
            return m.default_mutate(node)
        iv = node.node
        tag = str(iv.thread_tag)
        body = m.mutate(node.body)
        if tag.startswith("blockIdx"):
            blocks.append((tag, iv.var, node.value))
            return body
        if _uses(body, iv.var):
            raise UnsupportedOnTargetError(
                f"this kernel reads its thread id ({tag}): the CPU backend runs a block as one thread, so "
                "it does not run thread-level code",
                hint="compile it for a CUDA or HIP target (TILE_DEVICE=emu runs that code on this CPU in the "
                "emulator), or express per-thread work with T.Parallel / tile operators",
                location=first_location(func),
            )
        return body

    body = mutate(func.body, [(tirx.AttrStmt, on_attr)])
    if not blocks:
        return func.with_body(body)
    blocks.sort(key=lambda b: b[0])  # blockIdx.x, .y, .z
    flat = tirx.Var("block", "int32")
    total: Any = tirx.const(1, "int32")
    replacement = {}
    stride: Any = tirx.const(1, "int32")
    for _, var, extent in blocks:
        replacement[var] = tirx.floormod(tirx.floordiv(flat, stride), extent) if len(blocks) > 1 else flat
        stride = stride * extent
        total = total * extent
    if len(blocks) > 1:
        replacement[blocks[-1][1]] = tirx.floordiv(flat, stride // blocks[-1][2])

    def substitute(v: Any) -> Any:
        for old, new in replacement.items():
            if v.same_as(old):
                return new
        return v

    body = tvm_ffi.structural_map(body, (ir.Var, substitute))
    kind = tirx.ForKind.SERIAL if cross_block_atomics else tirx.ForKind.PARALLEL
    return func.with_body(tirx.For(flat, 0, total, kind, body))


SERIALIZE_BLOCK_GRID = function_pass(
    _serialize, name="serialize_block_grid", needs={BLOCK_GRID, TILE_OPS_LOWERED},
    guarantees={GRID_SERIALIZED}, invalidates={BLOCK_GRID})  # fmt: skip
serialize_block_grid = SERIALIZE_BLOCK_GRID.run
