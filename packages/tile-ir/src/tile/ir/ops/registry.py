"""Registration of tile ops as TVM ``Op`` objects and of their lowering rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi

if TYPE_CHECKING:
    from ..target import Target
    from .base import TileOp

_OPAQUE_EFFECT = 4  # CallEffectKind::kOpaque: the call reads and writes memory
_registered: set[str] = set()


def ensure_op(name: str) -> Any:
    """Register ``name`` as a TVM ``Op`` once (idempotent) and return it."""
    if name not in _registered:
        try:
            tvm.ir.Op.get(name)
        except Exception:
            tvm_ffi.get_global_func("ir.RegisterOp")(name, f"tile operator {name}")
            tvm.ir.register_op_attr(name, "TCallEffectKind", _OPAQUE_EFFECT)
            tvm.ir.register_op_attr(name, "TScriptPrinterName", name)
        _registered.add(name)
    return tvm.ir.Op.get(name)


LoweringRule = Callable[["TileOp", Any], Any]
"""``rule(op, ctx: LowerContext) -> tirx.Stmt``."""


class _Rule:
    def __init__(
        self, target_kind: str | None, when: Callable[[Target], bool] | None, fn: LoweringRule
    ) -> None:
        self.target_kind = target_kind
        self.when = when
        self.fn = fn

    def matches(self, target: Target) -> bool:
        if self.target_kind is not None and self.target_kind != target.kind:
            return False
        return self.when is None or bool(self.when(target))


_rules: dict[type, list[_Rule]] = {}


def register_lowering(
    op_cls: type[TileOp],
    target: str | None = None,
    *,
    when: Callable[[Target], bool] | None = None,
) -> Callable[[LoweringRule], LoweringRule]:
    """Register a lowering rule for ``op_cls``.

    ``target=None`` registers the generic rule every backend inherits. A rule for a
    target kind (optionally narrowed by ``when(target)``, e.g. an arch check) wins
    over the generic one; the most recently registered matching rule wins.

    Example::

        @register_lowering(Copy, target="cpu")
        def copy_on_cpu(op, ctx):
            return op.lower_loops(ctx)
    """

    def decorate(fn: LoweringRule) -> LoweringRule:
        _rules.setdefault(op_cls, []).append(_Rule(target, when, fn))
        return fn

    return decorate


def find_lowering(op_cls: type[TileOp], target: Target) -> LoweringRule | None:
    """The rule that lowers ``op_cls`` for ``target``: specific first, then generic."""
    rules = _rules.get(op_cls, [])
    for rule in reversed(rules):
        if rule.target_kind is not None and rule.matches(target):
            return rule.fn
    for rule in reversed(rules):
        if rule.target_kind is None and rule.matches(target):
            return rule.fn
    return None
