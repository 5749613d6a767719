"""Scheduling hints recorded on the kernel: swizzled block order, layouts, gemm warp policy.

* ``T.use_swizzle(panel_size, order="row", enable=True)``: visit blocks in panels
  of ``panel_size`` for L2 reuse. Recorded as the ``tile.block_swizzle`` kernel
  attribute; a pure schedule hint (results never depend on it, and the CPU
  ignores it).
* ``T.annotate_layout({buffer: layout})``: fixes buffer layouts; recorded as the
  ``tile.annotated_layouts`` kernel attribute (buffer name -> encoded layout),
  which layout inference treats as strict requirements. A plain ``T.Layout`` of a
  shared tile that stores every element where a hardware swizzle does (TileLang
  programs build theirs by hand, e.g. from ``get_swizzle_layout``) is recorded as
  that swizzle, which the GPU backends apply to shared memory.
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
from tile.layout import Fragment, Layout, LayoutError, dtype_bits
from tile.layout.errors import LayoutValueError
from tile.layout.swizzle import SwizzledLayout

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
        _check_injective(buffer, layout)
        recorded[str(buffer.name)] = encode_layout(_as_hardware_swizzle(buffer, layout))
    session.func_attrs[ANNOTATED_LAYOUTS] = recorded


def _check_injective(buffer: Any, layout: Layout) -> None:
    """Refuse a plain layout that stores two elements of ``buffer`` at one place (they would
    overwrite each other). A fragment may hold an element on several threads (replication);
    a layout that cannot be enumerated point by point (symbolic, too large) is taken as given."""
    if isinstance(layout, Fragment):
        return
    try:
        found = layout.collision()
    except LayoutError:
        return
    if found is None:
        return
    first, second, place = found
    scope = str(buffer.scope())
    kind = "shared" if scope.startswith("shared") else scope
    raise LayoutValueError(
        f"the layout given to T.annotate_layout for {kind} buffer `{buffer.name}` must be "
        f"injective: elements {list(first)} and {list(second)} both map to physical "
        f"coordinates {list(place)}, so one would overwrite the other",
        hint="give every element its own place: a permutation (a swizzle) or a padded "
        "layout such as T.Layout(shape, lambda i: i * 2)",
    )


SWIZZLE_CHECK_POINTS = 1 << 16
"""Largest shared tile (elements) whose plain layout is compared with the hardware swizzles."""


def _storage_offsets(layout: Layout) -> list[int]:
    shape = [int(d) for d in layout.get_output_shape()]
    offsets = []
    for _, out in layout.enumerate():
        offset = 0
        for index, extent in zip(out, shape, strict=True):
            offset = offset * extent + index
        offsets.append(offset)
    return offsets


def _as_hardware_swizzle(buffer: Any, layout: Layout) -> Layout:
    """``layout``, or the hardware swizzle of ``buffer`` that stores every element at the same
    offset (the backends apply swizzles to shared memory; other plain layouts stay row-major)."""
    if isinstance(layout, Fragment | SwizzledLayout) or not str(buffer.scope()).startswith("shared"):
        return layout
    shape = layout.const_input_shape()
    if shape is None or len(shape) != 2 or shape[0] * shape[1] > SWIZZLE_CHECK_POINTS:
        return layout
    try:
        wanted = _storage_offsets(layout)
    except LayoutError:  # not enumerable point by point
        return layout
    for span in (128, 64, 32):
        try:
            candidate = SwizzledLayout(list(shape), dtype_bits(str(buffer.dtype)), span)
        except LayoutError:  # rows not whole spans, or not whole 8-row atoms
            continue
        if _storage_offsets(candidate) == wanted:
            return candidate
    return layout
