"""Pass ``fold_block_columns``: a thread walks whole rows, not a GPU block's narrow column strip.

A GPU elementwise kernel tiles a matrix into ``block_M x block_N`` blocks with a short
``block_N`` (64 floats: 256 bytes). On one CPU core a block then reads ``block_M``
rows 256 bytes at a time, one short run per row and array: too many concurrent
streams for the hardware prefetchers, and the kernel runs at a fraction of the memory
bandwidth. When a block is nothing but one fully parallel loop nest, the blocks along
``blockIdx.x`` and the nest's iterations are all independent, so the x blocks can be
run inside the nest instead: each (remaining) block walks its rows end to end.

Needs: the block body after ``fuse_fragment_loops`` (runs before ``split_dynamic_tails``).
Guarantees: the function is unchanged unless its block body (inside the launch
attributes) is exactly one perfect ``tile.parallel`` nest whose accesses this pass
sees completely, ``blockIdx.x`` has a constant extent ``gx > 1`` and appears only in
the last index of global buffer accesses (the contiguous dim) and in no guard, and
the innermost loop covers fewer than ``SHORT_RUN_BYTES`` of that dim. Then
``blockIdx.x`` gets extent 1 and a ``tile.parallel`` loop over ``gx`` values is put
just outside the innermost loop, with ``blockIdx.x`` replaced by its variable. Every
(block, iteration) pair runs exactly once, in another order; they are independent
(``T.Parallel`` nest, blocks never synchronize), so the result is the same.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.annotations import PARALLEL_LOOP
from tile.ir.transform import Property, function_pass
from tile.ir.transform.infer_layout import is_parallel, parallel_nest
from tile.ir.transform.properties import BLOCK_GRID, PARALLEL_NESTS

from .fuse_fragment_loops import FRAGMENT_LOOPS_FUSED, summarize

SHORT_RUN_BYTES = 4096
"""Innermost runs shorter than a page are folded; longer ones already stream well."""


def _uses(node: Any, var: Any) -> bool:
    hit = tvm_ffi.structural_walk(
        node, (ir.Var, lambda v: tvm_ffi.VisitInterrupt(True) if v.same_as(var) else None)
    )
    return hit is not None


def _guards_use(body: Any, var: Any) -> bool:
    found: list[Any] = []

    def on_if(node: Any) -> None:
        found.append(node.condition)

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name).endswith("if_then_else"):
            found.append(call.args[0])

    tvm_ffi.structural_walk(body, [(tirx.IfThenElse, on_if), (ir.Call, on_call)])
    return any(_uses(c, var) for c in found)


def _fold(attr: Any, nest_root: Any) -> Any | None:
    bx = attr.node.var
    extent = attr.value
    if not isinstance(extent, tirx.IntImm) or int(extent.value) < 2:
        return None
    nest = parallel_nest(nest_root)
    inner = nest[-1]
    summary = summarize(nest_root)
    if summary.opaque or any(isinstance(s, tirx.For) for s in _stmts(inner.body)):
        return None
    if _guards_use(inner.body, bx) or not isinstance(inner.extent, tirx.IntImm):
        return None
    widest = 0
    for access in summary.accesses:
        lead, last = access.indices[:-1], access.indices[-1:]
        if any(_uses(i, bx) for i in lead):
            return None  # blockIdx.x picks rows: the blocks already walk rows
        if last and _uses(last[0], bx):
            if str(access.buffer.scope()) != "global" or not _uses(last[0], inner.loop_var):
                return None
            widest = max(widest, int(inner.extent.value) * _bytes(access.buffer.dtype))
    if widest == 0 or widest >= SHORT_RUN_BYTES:
        return None
    col = tirx.Var(f"{bx.name}_fold", str(bx.ty))
    body = tvm_ffi.structural_map(inner.body, (ir.Var, lambda v: col if v.same_as(bx) else v))
    folded = tirx.For(
        inner.loop_var, inner.min, inner.extent, inner.kind, body, inner.thread_binding, inner.annotations
    )
    folded = tirx.For(col, 0, extent, tirx.ForKind.SERIAL, folded, None, {PARALLEL_LOOP: 1})
    for loop in reversed(nest[:-1]):
        folded = tirx.For(
            loop.loop_var, loop.min, loop.extent, loop.kind, folded, loop.thread_binding, loop.annotations
        )
    one = tirx.const(1, str(extent.ty))
    iv = attr.node
    node = tirx.IterVar(ir.Range(0, one), bx, iv.iter_type, iv.thread_tag)
    return node, one, folded


def _stmts(stmt: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tirx.Stmt, found.append))
    return found[1:] if found and found[0].same_as(stmt) else found


def _bytes(dtype: Any) -> int:
    dt = tvm_ffi.dtype(str(dtype))
    return (int(dt.bits) * int(dt.lanes) + 7) // 8


def fold_block_columns(func: Any) -> Any:
    """Run a kernel's ``blockIdx.x`` blocks inside its single parallel nest (module docstring)."""
    chain: list[Any] = []
    body = func.body
    while isinstance(body, tirx.AttrStmt):
        chain.append(body)
        body = body.body
    xs = [a for a in chain if str(a.attr_key) == "thread_extent" and str(a.node.thread_tag) == "blockIdx.x"]
    if len(xs) != 1 or not (isinstance(body, tirx.For) and is_parallel(body)):
        return func
    folded = _fold(xs[0], body)
    if folded is None:
        return func
    node, one, body = folded
    for attr in reversed(chain):
        if attr.same_as(xs[0]):
            body = tirx.AttrStmt(node, attr.attr_key, one, body)
        else:
            body = tirx.AttrStmt(attr.node, attr.attr_key, attr.value, body)
    return func.with_body(body)


BLOCK_COLUMNS_FOLDED = Property(
    "block_columns_folded",
    "a block that is one short-row parallel nest walks whole rows across blockIdx.x",
)
FOLD_BLOCK_COLUMNS = function_pass(
    fold_block_columns,
    needs={FRAGMENT_LOOPS_FUSED, PARALLEL_NESTS, BLOCK_GRID},
    guarantees={BLOCK_COLUMNS_FOLDED},
)
