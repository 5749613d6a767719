"""Pass ``check_resources``: reject kernels that ask the target for more than it has.

Needs: kernels as written (allocations and ``T.Kernel`` thread extents still carry
their source spans), and ``CompileContext.capabilities``. Guarantees: the module is
returned unchanged; on return,

* the block's thread count (product of the ``threadIdx`` extents) is at most
  ``capabilities.max_threads``;
* the shared-memory allocations of one kernel sum to at most
  ``capabilities.shared_bytes`` (counted as written: a backend whose storage planner
  reuses memory across lifetimes should place a planned-size check after it);
* every buffer's element type is in ``capabilities.dtypes``.

Otherwise it raises ``ResourceLimitError`` / ``UnsupportedOnTargetError`` naming the
allocation sites.
"""

from __future__ import annotations

import math
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import tirx

from ..errors import ResourceLimitError, SourceLocation, UnsupportedOnTargetError, location_from_span
from ..ops.region import as_int
from .pipeline import CompileContext, Pass

_SHARED_PREFIX = "shared"


def _size_bytes(buffer: Any) -> int | None:
    dims = [as_int(d) for d in buffer.shape]
    if any(d is None for d in dims):
        return None
    count = math.prod(d for d in dims if d is not None)
    return (count * int(tvm.DataType(str(buffer.dtype)).bits) + 7) // 8


def _describe(buffer: Any, size: int, where: SourceLocation | None) -> str:
    shape = "x".join(str(d) for d in buffer.shape)
    site = f" at {where.filename}:{where.line}" if where is not None else ""
    return f"{buffer.name} ({shape} {buffer.dtype}, {size} bytes){site}"


def _check_func(func: Any, name: str, ctx: CompileContext) -> None:
    caps = ctx.capabilities
    shared: list[tuple[Any, int, SourceLocation | None]] = []
    threads: list[tuple[int, SourceLocation | None]] = []
    bad_dtype: list[tuple[Any, SourceLocation | None]] = []

    def on_alloc(node: Any) -> None:
        buffer = node.buffer
        where = location_from_span(getattr(node, "span", None))
        if str(buffer.dtype) not in caps.dtypes:
            bad_dtype.append((buffer, where))
        if str(buffer.scope()).startswith(_SHARED_PREFIX):
            size = _size_bytes(buffer)
            if size is not None:
                shared.append((buffer, size, where))

    def on_attr(node: Any) -> None:
        if str(node.attr_key) != "thread_extent":
            return
        tag = str(getattr(node.node, "thread_tag", ""))
        extent = as_int(node.value)
        if tag.startswith("threadIdx") and extent is not None:
            threads.append((extent, location_from_span(getattr(node, "span", None))))

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc), (tirx.AttrStmt, on_attr)])

    for param in func.params:
        if tirx.is_buffer_var(param) and str(param.dtype) not in caps.dtypes:
            bad_dtype.insert(0, (param, None))
    if bad_dtype:
        buffer, where = bad_dtype[0]
        raise UnsupportedOnTargetError(
            f"kernel {name}: buffer {buffer.name} has element type {buffer.dtype}, "
            f"which target {ctx.target} does not support",
            hint=f"use one of: {', '.join(sorted(caps.dtypes))}",
            location=where,
        )

    block_threads = math.prod(extent for extent, _ in threads) if threads else 1
    if block_threads > caps.max_threads:
        raise ResourceLimitError(
            f"kernel {name} asks for {block_threads} threads per block; "
            f"target {ctx.target} allows at most {caps.max_threads}",
            hint=f"pass threads= at most {caps.max_threads} to T.Kernel",
            location=threads[0][1],
        )

    total = sum(size for _, size, _ in shared)
    if total > caps.shared_bytes:
        biggest = sorted(shared, key=lambda item: -item[1])
        sites = "; ".join(_describe(buf, size, where) for buf, size, where in biggest)
        raise ResourceLimitError(
            f"kernel {name} allocates {total} bytes of shared memory; "
            f"target {ctx.target} has {caps.shared_bytes}: {sites}",
            hint="use smaller tiles (block sizes) or fewer pipeline stages, or keep tiles in fragments",
            location=biggest[0][2],
        )


def check_resources(mod: Any, ctx: CompileContext) -> Any:
    """Check thread count, shared memory and element types against the target (see module docstring)."""
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            _check_func(func, gvar.name_hint, ctx)
    return mod


CHECK_RESOURCES = Pass("check_resources", check_resources)
