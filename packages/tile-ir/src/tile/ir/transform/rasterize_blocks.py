"""Pass ``rasterize_blocks``: ``T.use_swizzle(panel_size, order)`` on targets with a hardware grid.

A GPU launches the blocks of a 2-D grid in linear order, ``blockIdx.x`` fastest. For a
GEMM that means one row of C blocks after another: every block of the row reads the
same A panel but a different B panel, and by the time the next row starts, the first B
panels have left L2. ``T.use_swizzle(P)`` asks for the blocks to be visited in panels
of ``P`` block rows instead, column by column inside the panel, so a wave of resident
blocks shares both its A and its B panels.

Needs: the kernel attribute ``tile.block_swizzle`` (``{"panel_size": P, "order":
"row"|"col"}``, written by ``T.use_swizzle``) and the grid as ``thread_extent``
attributes on ``blockIdx.x`` / ``blockIdx.y``. Guarantees: the kernel body sees a
permuted block index. With ``L = blockIdx.y * gx + blockIdx.x`` the hardware's launch
order, for ``order="row"``::

    panel = L // (P * gx);  r = L % (P * gx);  rows = min(P, gy - panel * P)
    by    = panel * P + r % rows;               bx   = r // rows

and ``order="col"`` is the same with the roles of x and y exchanged. Every ``(bx, by)``
is produced exactly once (the last, shorter panel included), so results never depend
on the attribute; only the order, and with it the cache reuse, changes. A kernel
without the attribute, or with a one-dimensional grid, is left as it is; the CPU
ignores the attribute (its blocks run in a host loop).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from .pipeline import function_pass
from .properties import BLOCK_GRID, BLOCKS_RASTERIZED

BLOCK_SWIZZLE = "tile.block_swizzle"


def permuted(bx: Any, by: Any, gx: Any, gy: Any, panel_size: int, order: str) -> tuple[Any, Any]:
    """The ``(bx, by)`` the kernel body sees at launch position ``(bx, by)`` (module docstring).

    Works on TIR expressions and on plain Python ints alike.
    """
    if order == "col":
        y, x = permuted(by, bx, gy, gx, panel_size, "row")
        return x, y
    linear = by * gx + bx
    span = panel_size * gx
    panel = linear // span
    r = linear % span
    rows = _min(gy - panel * panel_size, panel_size)
    return r // rows, panel * panel_size + r % rows


def _min(a: Any, b: int) -> Any:
    return min(a, b) if isinstance(a, int) else tirx.min(a, tirx.const(b, str(a.ty)))


def _swizzle_of(func: Any) -> tuple[int, str] | None:
    attrs = func.attrs
    if attrs is None or BLOCK_SWIZZLE not in attrs:
        return None
    spec = attrs[BLOCK_SWIZZLE]
    return int(spec["panel_size"]), str(spec["order"])


def _rasterize(func: Any) -> Any:
    """Permute the block index per ``T.use_swizzle`` (see the module docstring)."""
    spec = _swizzle_of(func)
    if spec is None:
        return func
    panel_size, order = spec
    chain: list[Any] = []
    stmt = func.body
    while isinstance(stmt, tirx.AttrStmt) and str(stmt.attr_key) == "thread_extent":
        chain.append(stmt)
        stmt = stmt.body
    grid = {str(a.node.thread_tag): (a.node.var, a.value) for a in chain}
    if "blockIdx.x" not in grid or "blockIdx.y" not in grid or panel_size < 2:
        return func
    (bx, gx), (by, gy) = grid["blockIdx.x"], grid["blockIdx.y"]
    sx, sy = tirx.Var("bx_swizzled", str(bx.ty)), tirx.Var("by_swizzled", str(by.ty))

    def rename(v: Any) -> Any:
        return sx if v.same_as(bx) else sy if v.same_as(by) else v

    body = tvm_ffi.structural_map(stmt, (ir.Var, rename))
    new_x, new_y = permuted(bx, by, gx, gy, panel_size, order)
    body = tirx.SeqStmt([tirx.Bind(sx, new_x), tirx.Bind(sy, new_y), body])
    for attr in reversed(chain):
        body = tirx.AttrStmt(attr.node, attr.attr_key, attr.value, body)
    return func.with_body(body)


RASTERIZE_BLOCKS = function_pass(
    _rasterize, name="rasterize_blocks", needs={BLOCK_GRID}, guarantees={BLOCKS_RASTERIZED}
)
rasterize_blocks = RASTERIZE_BLOCKS.run
