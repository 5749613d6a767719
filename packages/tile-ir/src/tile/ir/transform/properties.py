"""The properties of tile IR that the generic passes need and guarantee.

One table, like ``tile/ir/annotations.py``: pass contracts (``Pass.needs``,
``Pass.guarantees``, ``Pass.invalidates``) name these objects, never strings. A backend
defines the properties only its own passes speak of beside those passes.

``ENTRY_PROPERTIES`` is what the front end's tile IR satisfies: tile ops are calls,
``T.Parallel`` and ``T.Pipelined`` loops carry their annotations, the grid is
``thread_extent`` attributes. The passes that consume these *invalidate* them, so a pass
that needs one must run before its consumer (``infer_layout`` before ``lower_tile_ops``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..annotations import (
    LAYOUT_MAP,
    LOOP_FRAGMENT,
    PARALLEL_LOOP,
    PIPELINE_ORDER,
    PIPELINE_STAGE,
    PIPELINED_LOOP,
    SHARED_BYTES,
)
from ..ops import REGION_OP, op_class_of
from .pipeline import CompileContext, Property, PropertyCheck


def _prim_funcs(mod: Any) -> list[tuple[str, Any]]:
    return [(gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]


def _first(mod: Any, kind: type, bad: Callable[[Any], str | None]) -> str | None:
    """The first ``bad(node)`` sentence over nodes of ``kind`` in any function, else None."""
    found: list[str] = []

    def visit(node: Any) -> None:
        if not found:
            reason = bad(node)
            if reason is not None:
                found.append(reason)

    for name, func in _prim_funcs(mod):
        tvm_ffi.structural_walk(func.body, (kind, visit))
        if found:
            return f"{found[0]} in {name}"
    return None


def _loop_keys(loop: Any) -> set[str]:
    return set() if loop.annotations is None else {str(k) for k in loop.annotations}


def loops_without(*keys: str) -> PropertyCheck:
    """A check that no loop carries any of the annotations ``keys``."""

    def check(mod: Any, ctx: CompileContext) -> str | None:
        def bad(loop: Any) -> str | None:
            left = sorted(_loop_keys(loop) & set(keys))
            return f"loop {loop.loop_var} still carries {left}" if left else None

        return _first(mod, tirx.For, bad)

    return check


def _has_layout_map(mod: Any, ctx: CompileContext) -> str | None:
    for name, func in _prim_funcs(mod):
        if func.attrs is None or LAYOUT_MAP not in func.attrs:
            return f"function {name} has no {LAYOUT_MAP} attribute"
    return None


def _pipelines_planned(mod: Any, ctx: CompileContext) -> str | None:
    def bad(loop: Any) -> str | None:
        keys = _loop_keys(loop)
        if PIPELINED_LOOP in keys and not {PIPELINE_STAGE, PIPELINE_ORDER} <= keys:
            return f"pipelined loop {loop.loop_var} has no stage/order plan"
        return None

    return _first(mod, tirx.For, bad)


def _storage_planned(mod: Any, ctx: CompileContext) -> str | None:
    def bad(node: Any) -> str | None:
        scope = str(node.buffer.scope())
        return f"the shared buffer {node.buffer.name} is unplanned" if scope.startswith("shared") else None

    for name, func in _prim_funcs(mod):
        if func.attrs is not None and SHARED_BYTES in func.attrs:
            continue
        reason = _first(tvm.IRModule({name: func}), tirx.AllocBuffer, bad)
        if reason is not None:
            return f"{reason} (no {SHARED_BYTES} attribute)"
    return None


def _no_tile_calls(mod: Any, ctx: CompileContext) -> str | None:
    def op_left(call: Any) -> str | None:
        return f"the tile op {call.op.name} is left" if op_class_of(call) is not None else None

    def region_left(call: Any) -> str | None:  # an operand region outside any op: reported second
        if isinstance(call.op, ir.Op) and str(call.op.name) == REGION_OP:
            return f"a {REGION_OP} is left"
        return None

    return _first(mod, ir.Call, op_left) or _first(mod, ir.Call, region_left)


def _no_fragments(mod: Any, ctx: CompileContext) -> str | None:
    if not ctx.capabilities.thread_binding:
        return None  # one thread per block: fragments stay plain arrays (lower_fragments' contract)

    def bad(node: Any) -> str | None:
        if str(node.buffer.scope()) == "local.fragment":
            return f"the fragment {node.buffer.name} is left"
        return None

    return _first(mod, tirx.AllocBuffer, bad)


def statements_without(*keys: str) -> PropertyCheck:
    """A check that no ``AttrStmt`` has any of the keys ``keys``."""

    def check(mod: Any, ctx: CompileContext) -> str | None:
        def bad(node: Any) -> str | None:
            key = str(node.attr_key)
            return f"an attribute statement {key} is left" if key in keys else None

        return _first(mod, tirx.AttrStmt, bad)

    return check


# ---------------------------------------------------------------- what the front end gives
TILE_OPS = Property("tile_ops", "tile ops are Evaluate calls with their operand regions, not yet lowered")
PARALLEL_NESTS = Property("parallel_nests", "T.Parallel nests are For chains annotated tile.parallel")
PIPELINED_LOOPS = Property("pipelined_loops", "T.Pipelined loops carry their schedule annotations")
BLOCK_GRID = Property("block_grid", "the grid and the block's threads are thread_extent attributes")
ENTRY_PROPERTIES = frozenset({TILE_OPS, PARALLEL_NESTS, PIPELINED_LOOPS, BLOCK_GRID})

# ---------------------------------------------------------------- what the generic passes give
RESOURCES_FIT = Property(
    "resources_fit", "the block's threads and every dtype are within the target's limits"
)
SHARED_FITS = Property("shared_fits", "the kernel's shared memory fits the target's capacity")
NORMALIZED = Property("normalized", "regions, loop bounds and parallel nests are in canonical form")
LAYOUTS_INFERRED = Property(
    "layouts_inferred", f"every function carries {LAYOUT_MAP} and parallel nests their fragments",
    check=_has_layout_map,
)  # fmt: skip
PIPELINE_PLANNED = Property(
    "pipeline_planned", "every pipelined loop carries a stage and an order per statement",
    check=_pipelines_planned,
)  # fmt: skip
STORAGE_PLANNED = Property(
    "storage_planned", f"every function with shared buffers carries {SHARED_BYTES} and its arena",
    check=_storage_planned,
)  # fmt: skip
TILE_OPS_LOWERED = Property("tile_ops_lowered", "no tile op call is left", verify=_no_tile_calls)
FP8_LEGALIZED = Property("fp8_legalized", "no scalar fp8 cast is left; fp8 buffers are read as bytes")
TAILS_SPLIT = Property("tails_split", "guarded parallel nests have a predicate-free main path where provable")
PIPELINED_LOOPS_SCHEDULED = Property(
    "pipelined_loops_scheduled", "no loop carries a T.Pipelined annotation",
    check=loops_without(PIPELINED_LOOP),
)  # fmt: skip
PARALLEL_LOOPS_SCHEDULED = Property(
    "parallel_loops_scheduled", "parallel nests are bound to threads or vectorized, none annotated",
    check=loops_without(PARALLEL_LOOP, LOOP_FRAGMENT),
)  # fmt: skip
FRAGMENTS_LOWERED = Property(
    "fragments_lowered", "no local.fragment buffer is left where blocks have threads", check=_no_fragments
)
SHARED_LAYOUTS_APPLIED = Property(
    "shared_layouts_applied",
    "shared buffers with a swizzled layout are stored and addressed under it (GPU backends' pass)",
)
BLOCKS_RASTERIZED = Property("blocks_rasterized", "T.use_swizzle's permuted block index is in place")
GRID_SERIALIZED = Property(
    "grid_serialized",
    "the blocks run as one host loop; no thread_extent is left",
    check=statements_without("thread_extent"),
)

__all__ = [
    "BLOCKS_RASTERIZED",
    "BLOCK_GRID",
    "ENTRY_PROPERTIES",
    "FP8_LEGALIZED",
    "FRAGMENTS_LOWERED",
    "GRID_SERIALIZED",
    "LAYOUTS_INFERRED",
    "NORMALIZED",
    "PARALLEL_LOOPS_SCHEDULED",
    "PARALLEL_NESTS",
    "PIPELINED_LOOPS",
    "PIPELINED_LOOPS_SCHEDULED",
    "PIPELINE_PLANNED",
    "RESOURCES_FIT",
    "SHARED_FITS",
    "SHARED_LAYOUTS_APPLIED",
    "STORAGE_PLANNED",
    "TAILS_SPLIT",
    "TILE_OPS",
    "TILE_OPS_LOWERED",
    "loops_without",
    "statements_without",
]
