"""Atomic updates as calls into the vendor's device header, on every GPU target.

``lower_gpu_atomics``. Needs: the ``ATOMIC_UPDATE`` markers left by the atomic
lowering (``tile.ir.ops.atomic``) around stores ``dst[i] = op(dst[i], v)``.
Guarantees: no marker is left; updates of memory other threads can see (global or
shared) are ``tile::atomic_add/max/min/and/or/xor(&dst[i], v)`` calls (``tile_cuda.h``,
``tile_hip.h``); updates of per-thread registers stay plain stores.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..errors import UnsupportedOnTargetError
from ..ops import ATOMIC_UPDATE
from ..transform import Property, function_pass
from ..transform.properties import TILE_OPS_LOWERED

_KINDS = {
    "Add": "add",
    "Max": "max",
    "Min": "min",
    "BitwiseAnd": "and",
    "BitwiseOr": "or",
    "BitwiseXor": "xor",
}


def _reads_destination(expr: Any, store: Any) -> bool:
    """Whether ``expr`` is the update's read of its own element: ``dst[i]``, or that read under
    the guard a bounds check put around it (``if_then_else(i < n, dst[i], 0)``, a ``Select``)."""
    if isinstance(expr, ir.TensorLoad):
        return bool(expr.source.same_as(store.buffer)) and bool(
            tvm_ffi.structural_equal(list(expr.indices), list(store.indices))
        )
    if isinstance(expr, tirx.Select):
        return _reads_destination(expr.true_value, store)
    is_call = isinstance(expr, ir.Call) and isinstance(expr.op, ir.Op)
    if is_call and str(expr.op.name).endswith("if_then_else"):
        return _reads_destination(expr.args[1], store)
    return False


def _atomic_call(store: Any) -> Any:
    value = store.value
    kind = _KINDS.get(type(value).__name__)
    if kind is None:
        raise UnsupportedOnTargetError(f"cannot make the update {value} atomic")
    # the operand that is not the destination's own read: value.b may be a plain load of
    # another buffer while value.a is the guarded read of the destination (a safe-memory
    # guard wraps it), so the kind of node alone does not tell them apart
    if _reads_destination(value.a, store):
        operand = value.b
    elif _reads_destination(value.b, store):
        operand = value.a
    else:
        raise UnsupportedOnTargetError(
            f"the update {value} does not read its own element of {store.buffer.name}"
        )
    address = tirx.address_of(tirx.BufferLoad(store.buffer, list(store.indices)))
    call = tirx.call_extern(str(store.buffer.dtype), f"tile::atomic_{kind}", address, operand)
    return tirx.Evaluate(call)


def _lower_func(func: Any) -> Any:
    """Replace atomic-update markers by ``tile::atomic_*`` calls (see module docstring)."""

    def on_attr(node: Any) -> Any:
        if str(node.attr_key) != ATOMIC_UPDATE:
            return node
        scope = str(node.node.scope())
        if scope.startswith("local"):
            return node.body
        return tvm_ffi.structural_map(node.body, (tirx.BufferStore, _atomic_call))

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr)))


ATOMICS_LOWERED = Property(
    "atomics_lowered", "no atomic-update marker is left; shared and global updates are tile::atomic_* calls"
)
LOWER_GPU_ATOMICS = function_pass(
    _lower_func, name="lower_gpu_atomics", needs={TILE_OPS_LOWERED}, guarantees={ATOMICS_LOWERED}
)
lower_gpu_atomics = LOWER_GPU_ATOMICS.run
