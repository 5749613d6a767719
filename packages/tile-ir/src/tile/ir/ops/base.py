"""The tile-operator interface (paper section 3.2, Figure 4).

A tile op lives in the IR as ``Evaluate(Call(Op("tile.<name>"), args))``; buffer
operands are ``tile.region`` calls (see ``region.py``). Each op has a Python class
that decodes the call (``TileOp.decode``) and implements the two interfaces:

* ``infer_layout(ctx)``: the buffer layouts the op requires or prefers;
* ``lower(ctx)``: the op as plain loops/instructions for ``ctx.target``, through the
  rule registered with ``register_lowering`` (target-specific, else generic).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import tvm  # type: ignore[import-untyped]
from tvm import ir

from ..backend import Capabilities
from ..errors import SourceLocation, TileError, UnsupportedOnTargetError, location_from_span
from ..target import Target
from .layout_rules import LAYOUT_COMMON, int_shape, is_fragment_buffer, linear_fragment, region_is_whole
from .region import Region
from .registry import ensure_op, find_lowering

_OpT = TypeVar("_OpT", bound="TileOp")
_ErrT = TypeVar("_ErrT", bound=TileError)

_op_classes: dict[str, type[TileOp]] = {}


def tile_op(cls: type[_OpT]) -> type[_OpT]:
    """Class decorator: register ``cls.op_name`` as a TVM Op and map it to ``cls``."""
    ensure_op(cls.op_name)
    _op_classes[cls.op_name] = cls
    return cls


def op_class_of(call: object) -> type[TileOp] | None:
    """The ``TileOp`` class for a call to a registered tile op, else ``None``."""
    if isinstance(call, ir.Call) and isinstance(call.op, ir.Op):
        return _op_classes.get(str(call.op.name))
    return None


def decode(call: ir.Call) -> TileOp:
    """Decode a tile-op call into its ``TileOp`` object."""
    cls = op_class_of(call)
    if cls is None:
        raise TileError(f"{call} is not a tile operator call")
    op = cls.decode(call)
    op.span = getattr(call, "span", None)
    return op


@dataclasses.dataclass
class LowerContext:
    """What a lowering rule may read.

    Attributes:
        target: the compilation target.
        capabilities: the target's capabilities.
        analyzer: an arithmetic analyzer with the enclosing loop and block ranges bound.
        threads: the enclosing kernel's ``threads=`` (``None`` outside a kernel).
        layouts: buffer layouts chosen so far (by ``infer_layout``), by buffer name.
        location: where the op being lowered was written.
        level: during layout inference, the priority level being run (1 strict,
            2 copies/reductions, 3 parallel loops and defaults); 0 outside inference.
        free: during layout inference, whether an op may pick a default layout for a
            buffer nothing constrains (the last step of level 3).
        thread_var: during lowering, the enclosing kernel's ``threadIdx.x`` variable
            (``None`` outside a kernel or before the kernel is built). During
            ``lower_tile_ops`` ``layouts`` holds every layout ``infer_layout`` chose
            (``tile.layout_map``), so per-target rules can lower fragment operands
            per thread: a fragment element ``(i, j)`` lives on thread
            ``layouts[name].map_forward_thread([i, j])`` at local
            ``map_forward_index([i, j])`` (see ``transform/lower_fragments.py``).
    """

    target: Target
    capabilities: Capabilities
    analyzer: Any = dataclasses.field(default_factory=lambda: tvm.sym.Analyzer())
    threads: int | None = None
    layouts: dict[str, Any] = dataclasses.field(default_factory=dict)
    location: SourceLocation | None = None
    level: int = 0
    free: bool = False
    thread_var: Any = None
    swizzled_views: frozenset[str] = frozenset()
    """During ``lower_tile_ops``, the names of views (``T.reshape``, ``T.view``) of shared
    tiles with a swizzled layout: their storage is not row-major, so a copy that places
    whole rows itself (a DMA) must not take them; element accesses follow the swizzle."""

    def error(self, cls: type[_ErrT], message: str, hint: str | None = None) -> _ErrT:
        """Build a typed error located at the op being lowered."""
        return cls(message, hint=hint, location=self.location)


class TileOp:
    """Base class of every tile operator's Python view."""

    op_name: ClassVar[str]
    layout_level: ClassVar[int] = LAYOUT_COMMON
    """The inference level at which this op's ``infer_layout`` starts to run."""
    span: Any = None

    @classmethod
    def decode(cls: type[_OpT], call: ir.Call) -> _OpT:
        """Rebuild the op from its IR call."""
        raise NotImplementedError

    def encode(self) -> ir.Call:
        """The op as an IR call (``Evaluate`` it to make a statement)."""
        raise NotImplementedError

    @property
    def location(self) -> SourceLocation | None:
        return location_from_span(self.span)

    def regions(self) -> list[Region]:
        """Every buffer operand of the op (its ``Region`` attributes, in definition order)."""
        return [v for v in vars(self).values() if isinstance(v, Region)]

    def infer_layout(self, ctx: LowerContext) -> Mapping[str, Any]:
        """Layouts this op needs for its buffers, by buffer name; empty = no constraint.

        Called by the ``infer_layout`` pass at every level from ``layout_level`` on,
        with ``ctx.layouts`` holding what is known so far. The generic rule (for ops
        that only move elements between same-shaped tiles, e.g. cumsum or atomics):
        fragment operands that cover their whole buffer share one fragment, so an
        unknown one takes a known one's; in the free step, a whole-buffer fragment
        operand nothing constrains gets the row-major thread binding.
        """
        fragments = [r for r in self.regions() if is_fragment_buffer(r.buffer) and region_is_whole(r)]
        known = [r for r in fragments if r.name in ctx.layouts]
        out: dict[str, Any] = {}
        for region in fragments:
            if region.name in ctx.layouts:
                continue
            shape = int_shape(list(region.buffer.shape))
            same = [k for k in known if int_shape(list(k.buffer.shape)) == shape]
            if same:
                out[region.name] = ctx.layouts[same[0].name]
            elif ctx.free and shape is not None:
                out[region.name] = linear_fragment(shape, ctx.threads or 1)
        return out

    def lower(self, ctx: LowerContext) -> Any:
        """Lower to plain TIR for ``ctx.target`` using the registered rule."""
        rule = find_lowering(type(self), ctx.target)
        if rule is None:
            raise ctx.error(
                UnsupportedOnTargetError,
                f"{self.op_name} has no lowering for target {ctx.target}",
                hint="this operator is not implemented on this backend yet",
            )
        return rule(self, ctx)
