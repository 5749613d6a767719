"""TIR's thread all-reduce, as TileLang programs write it by hand::

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", handle):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, out[0], tx, dtype="handle"))

Every thread of a group (the threads that differ only along the listed thread indices) ends
with the combination of the group's values in ``out[0]``. tile builds it from shared memory:
each thread stores its value (the identity where its condition is false), a barrier, then each
thread folds the group's values in thread order with the reducer's combiner, and a barrier so
the scratch may be reused. A GPU target (or the emulator) runs it; the CPU backend refuses
thread-level code as usual.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from ..errors import ArgumentTypeError, TileScopeError
from .builtins import _alloc, _kernel
from .session import current_session, in_kernel_session, record_thread_level_call

_SCOPE_KEY = "reduce_scope"


@contextmanager
def _reduce_scope(reducer: Any) -> Any:
    stack = current_session("T.attr").comm_reducers
    stack.append(reducer)
    try:
        yield None
    finally:
        stack.pop()


def attr(node: Any, attr_key: str | None = None, value: Any = None) -> Any:
    """``with T.attr(node, key, value):``. A ``T.comm_reducer`` under ``"reduce_scope"`` makes
    the reducer of the ``T.tvm_thread_allreduce`` calls inside; other attributes are TIR's
    ``AttrStmt`` (``T.attr`` of TVMScript), which tile's passes leave as they are."""
    if isinstance(node, tirx.CommReducer) and attr_key == _SCOPE_KEY and in_kernel_session():
        return _reduce_scope(node)
    return _script.attr(node, attr_key, value)


def _current_reducer() -> Any:
    stack = current_session("T.tvm_thread_allreduce").comm_reducers
    return stack[-1] if stack else None


def _combine(reducer: Any, acc: Any, value: Any) -> Any:
    lhs, rhs = reducer.lhs[0], reducer.rhs[0]

    def swap(var: Any) -> Any:
        if var.same_as(lhs):
            return acc
        return value if var.same_as(rhs) else var

    return tvm_ffi.structural_map(reducer.result[0], (tirx.Var, swap))


def tvm_thread_allreduce(*args: Any, dtype: str = "handle") -> Any:
    """``T.tvm_thread_allreduce(n, value, cond, out[0], *thread_vars)`` inside
    ``with T.attr(T.comm_reducer(...), "reduce_scope", ...)``: the all-reduce of ``value`` over
    the threads along ``thread_vars`` into ``out[0]`` of every one of them (one value, n == 1).
    Outside such a scope it is TIR's intrinsic call, unlowered."""
    reducer = _current_reducer() if in_kernel_session() else None
    if reducer is None:
        return _script.tvm_thread_allreduce(*args, dtype=dtype)
    if len(args) < 5 or len(reducer.result) != 1:
        raise ArgumentTypeError(
            "T.tvm_thread_allreduce takes (1, value, cond, out[i], thread_var, ...) with a "
            "one-value T.comm_reducer",
            hint="T.tvm_thread_allreduce(T.uint32(1), v[0], True, out[0], tx, dtype='handle')",
        )
    _count, value, cond, out, *axes = args
    if not isinstance(out, TensorLoad):
        raise ArgumentTypeError(
            f"T.tvm_thread_allreduce writes into one element, got {type(out).__name__}",
            hint="pass out[0] of a T.alloc_local((1,), dtype) buffer",
        )
    kernel = _kernel("T.tvm_thread_allreduce")
    bindings = current_session("T.tvm_thread_allreduce").thread_bindings
    dims = []
    for axis in axes:
        found = [d for d, var in enumerate(kernel.thread_vars) if var.same_as(axis)]
        found += [
            _THREAD_TAGS.index(tag) for var, tag in bindings if var.same_as(axis) and tag in _THREAD_TAGS
        ]
        if not found:
            raise TileScopeError(
                "T.tvm_thread_allreduce reduces over the kernel's thread indices",
                hint="pass tx = T.get_thread_binding(0) (or its y/z dims), or a "
                'T.thread_binding(0, n, thread="threadIdx.x") index',
            )
        dims.append(found[0])
    record_thread_level_call("T.tvm_thread_allreduce")
    extents = [int(e) for e in kernel.threads]
    strides = [1]
    for extent in extents[:-1]:
        strides.append(strides[-1] * extent)
    total = strides[-1] * extents[-1]
    linear = sum((v * s for v, s in zip(kernel.thread_vars, strides, strict=False)), tirx.const(0, "int32"))
    kind = str(out.ty)
    identity = tirx.Cast(kind, reducer.identity_element[0])
    scratch = _alloc("T.tvm_thread_allreduce", [total], kind, "shared")
    mine = cond if isinstance(cond, ir.Expr) else tirx.const(bool(cond), "bool")
    B.buffer_store(scratch, _script.if_then_else(mine, tirx.Cast(kind, value), identity), [linear])
    _sync()
    acc = _alloc("T.tvm_thread_allreduce", [1], kind, "local")
    B.buffer_store(acc, identity, [0])
    group = 1
    for d in dims:
        group *= extents[d]
    loop = B.serial(0, group)
    j = loop.__enter__()
    # the group member j: this thread's indices along the kept dims, j's digits along the
    # reduced ones
    index: Any = tirx.const(0, "int32")
    for d, var in enumerate(kernel.thread_vars):
        if d not in dims:
            index = index + var * strides[d]
    rest: Any = j
    for d in dims:
        index = index + tirx.floormod(rest, extents[d]) * strides[d]
        rest = tirx.floordiv(rest, extents[d])
    B.buffer_store(acc, tirx.Cast(kind, _combine(reducer, acc[0], scratch[index])), [0])
    loop.__exit__(None, None, None)
    B.buffer_store(out.source, acc[0], list(out.indices))
    _sync()
    return tirx.const(0, "int32")


_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def thread_binding(*args: Any, **kwargs: Any) -> Any:
    """``for tx in T.thread_binding(0, n, thread="threadIdx.x")``, TVMScript's thread loop; inside a
    ``T.Kernel`` TileLang also writes ``tx = T.thread_binding(0, n, thread="threadIdx.x")`` for the
    kernel's own thread index along that axis. Its variable is noted with its tag, so a
    ``T.tvm_thread_allreduce`` over it knows which thread axis it reduces."""
    frame = _script.thread_binding(*args, **kwargs)
    tag = kwargs.get("thread", args[2] if len(args) > 2 else None)
    if in_kernel_session() and isinstance(tag, str):
        current_session("T.thread_binding").thread_bindings.append((frame.vars[0], tag))
    return frame


def _sync() -> None:
    B.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


comm_reducer = _script.comm_reducer
"""``T.comm_reducer(lambda x, y: x + y, [identity])``: TIR's commutative reducer."""
