"""Scheduling hints recorded on the kernel: swizzled block order, layouts, gemm warp policy.

* ``T.use_swizzle(panel_size, order="row", enable=True)``: visit blocks in panels
  of ``panel_size`` for L2 reuse. Recorded as the ``tile.block_swizzle`` kernel
  attribute; a pure schedule hint (results never depend on it, and the CPU
  ignores it).
* ``T.annotate_layout({buffer: layout})``: fixes buffer layouts; recorded as the
  ``tile.annotated_layouts`` kernel attribute (buffer name -> encoded layout),
  which layout inference treats as strict requirements.
* ``T.GemmWarpPolicy``: how ``T.gemm`` splits its C tile over warps (``policy=``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.annotations import ANNOTATED_LAYOUTS
from tile.ir.ops.gemm import WARP_POLICY_FULL_COL, WARP_POLICY_FULL_ROW, WARP_POLICY_SQUARE
from tile.ir.ops.layout_rules import encode_layout
from tile.layout import Layout

from ..errors import TileScopeError, TileTypeError
from .session import current_session

BLOCK_SWIZZLE = "tile.block_swizzle"
"""PrimFunc attribute set by ``T.use_swizzle``: ``{"panel_size": int, "order": "row"|"col"}``."""


class GemmWarpPolicy(enum.IntEnum):
    """``T.gemm(..., policy=T.GemmWarpPolicy.FullRow)``: how warps split the C tile."""

    Square = WARP_POLICY_SQUARE
    FullRow = WARP_POLICY_FULL_ROW
    FullCol = WARP_POLICY_FULL_COL


def use_swizzle(panel_size: int, order: str = "row", enable: bool = True) -> None:
    """Visit the block grid in panels of ``panel_size`` blocks (a no-op for results)."""
    session = current_session("T.use_swizzle")
    if not session.kernels:
        raise TileScopeError(
            "T.use_swizzle can only be used inside a `with T.Kernel(...)` block",
            hint="call it first thing in the kernel body",
        )
    if not isinstance(panel_size, int) or panel_size < 1:
        raise TileTypeError(f"T.use_swizzle panel_size must be a positive int, got {panel_size!r}")
    if order not in ("row", "col"):
        raise TileTypeError(f'T.use_swizzle order must be "row" or "col", got {order!r}')
    if enable:
        session.func_attrs[BLOCK_SWIZZLE] = {"panel_size": panel_size, "order": order}


def annotate_layout(layouts: Mapping[Any, Any]) -> None:
    """Fix the layout of buffers: ``T.annotate_layout({A_shared: make_swizzled_layout(A_shared)})``."""
    session = current_session("T.annotate_layout")
    if not isinstance(layouts, Mapping):
        raise TileTypeError(
            f"T.annotate_layout takes a dict {{buffer: layout}}, got {type(layouts).__name__}",
            hint="write T.annotate_layout({A_shared: layout})",
        )
    recorded = dict(session.func_attrs.get(ANNOTATED_LAYOUTS, {}))
    for buffer, layout in layouts.items():
        if not tirx.is_buffer_var(buffer):
            raise TileTypeError(f"T.annotate_layout keys must be buffers, got {type(buffer).__name__}")
        if not isinstance(layout, Layout):
            raise TileTypeError(
                f"the layout for {buffer.name} is a {type(layout).__name__}, not a T.Layout/T.Fragment",
                hint="build one with T.Layout(...), T.Fragment(...) or tile.lang.layout helpers",
            )
        shape = [int(d) for d in layout.get_input_shape()]
        expected = [int(d) if hasattr(d, "value") else d for d in buffer.shape]
        if shape != expected:
            raise TileTypeError(
                f"the layout for {buffer.name} covers shape {shape}, but the buffer is {expected}",
                hint="make the layout's input shape the buffer's shape",
            )
        recorded[str(buffer.name)] = encode_layout(layout)
    session.func_attrs[ANNOTATED_LAYOUTS] = recorded
