"""Pass ``stack_small_locals``: small block-local buffers live on the stack, in registers after LLVM.

TVM's host lowering (``LowerTVMBuiltin``) serves every ``local`` / ``local.fragment``
allocation with a ``TVMBackendAllocWorkspace`` call, a heap pointer LLVM cannot see
through: a vectorized loop's per-lane locals (``x_lanes``, from
``vectorize_parallel_loops``), a reduction's vector partials and the scalar fragments
``fuse_fragment_loops`` leaves are then stored to and reloaded from memory at every
use. Only ``global``-scope CPU buffers under TVM's stack limit become an ``alloca``,
which LLVM's scalar replacement turns into registers.

Needs: nothing (run it last, after every pass that allocates locals).
Guarantees: every ``AllocBuffer`` of scope ``local`` or ``local.fragment`` whose
constant size is below ``STACK_BYTES`` has scope ``global`` (same shape, dtype and
name); nothing else changes. Each such buffer is still allocated where it was, so
blocks running in parallel each get their own copy (on their own thread's stack).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.transform import Property, function_pass

STACK_BYTES = 1024
"""TVM's ``kMaxStackAlloca``: larger CPU buffers go to the workspace allocator whatever their scope."""

_SCOPES = ("local", "local.fragment")


def _bytes(buffer: Any) -> int | None:
    count = 1
    for dim in buffer.shape:
        if not isinstance(dim, tirx.IntImm):
            return None
        count *= int(dim.value)
    dt = tvm_ffi.dtype(str(buffer.dtype))
    return count * ((int(dt.bits) * int(dt.lanes) + 7) // 8)


def stack_small_locals(func: Any) -> Any:
    """Give small local buffers ``global`` scope so they become stack allocas (module docstring)."""
    table: list[tuple[Any, Any]] = []

    def on_alloc(node: Any) -> None:
        buf = node.buffer
        size = _bytes(buf)
        if str(buf.scope()) in _SCOPES and size is not None and 0 < size < STACK_BYTES:
            table.append((buf, tirx.decl_buffer(buf.shape, buf.dtype, name=str(buf.name), scope="global")))

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
    if not table:
        return func

    def swap(var: Any) -> Any:  # a buffer is a variable: this renames its allocation and every access
        return next((new for old, new in table if var.same_as(old)), var)

    return func.with_body(tvm_ffi.structural_map(func.body, (ir.Var, swap)))


SMALL_LOCALS_ON_STACK = Property(
    "small_locals_on_stack",
    "small local buffers are global-scope allocations LLVM keeps on the stack",
)
STACK_SMALL_LOCALS = function_pass(stack_small_locals, guarantees={SMALL_LOCALS_ON_STACK})
