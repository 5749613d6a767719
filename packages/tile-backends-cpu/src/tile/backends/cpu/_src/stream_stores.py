"""Pass ``stream_stores``: rows of a large output are written with non-temporal stores.

An ordinary store to a line that is not in cache first reads the line from memory (write
allocate). For an output much larger than the last-level cache that read is pure waste:
a row softmax over 4096 x 4096 floats moves 192 MiB instead of 128. After
``fuse_fragment_loops``, a block writes such an output row as the last statement of a
row loop nest, copying its block-local buffer::

    for j_o in range(E):                       # serial
        for j_v in T.vectorized(W):
            x[j_o * W + j_v] = ...             # (any statements; x written only here)
            Y[r, j_o * W + j_v] = x[j_o * W + j_v]

This pass drops that store and, after the nest, hands the finished row to
``tile_stream_store`` (ukernels/stream_store.c: 64-byte lines with ``movntdq``, then
``sfence``). It applies when:

- ``Y`` is a kernel parameter of static size at least ``last_level_cache_bytes()`` that the
  kernel never reads and never takes the address of;
- the store is the last statement of the innermost (vectorized) loop, its value is a load
  of a 1-D block-local buffer ``x`` of the same dtype, and both indices run contiguously
  over the nest (``j_o * W + j_v`` plus terms free of both loop variables);
- every other store to ``x`` in the nest writes the same element the store reads (so
  ``x`` holds the row when the nest ends), and nothing else in the nest writes ``Y``;
- the row is at least ``MIN_ROW_BYTES`` long.

Smaller outputs keep ordinary stores: whoever reads them next finds them in cache.

Needs: nothing; run it after the passes that fuse and vectorize loops. Guarantees: the
kernel stores the same values to ``Y``.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import PARALLEL_LOOPS_SCHEDULED

from .host import last_level_cache_bytes
from .read_in_place import _mentions
from .stack_locals import _bytes
from .ukernels import STREAM_STORE_SYMBOL, use_stream_stores

MIN_ROW_BYTES = 1024
"""Shorter rows would spend more on the call and the fence than the stores save."""


def _int(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _untouched(body: Any, buffer: Any) -> bool:
    """No load of ``buffer`` and no ``address_of`` into it anywhere in ``body``."""

    def on_load(load: Any) -> Any:
        return tvm_ffi.VisitInterrupt(True) if load.source.same_as(buffer) else None

    return tvm_ffi.structural_walk(body, (ir.TensorLoad, on_load)) is None


def _contiguous(index: Any, outer: Any, inner: Any, width: int, analyzer: Any) -> Any | None:
    """``index - (outer * width + inner)`` when it mentions neither loop variable, else None."""
    rest = analyzer.simplify(index - (outer * width + inner))
    if _mentions(rest, outer) or _mentions(rest, inner):
        return None
    return rest


def _subst_zero(expr: Any, *vars_: Any) -> Any:
    zero = tirx.const(0, "int32")
    return tvm_ffi.structural_map(expr, (ir.Var, lambda v: zero if any(v.same_as(x) for x in vars_) else v))


def _rewrite_nest(outer: Any, outputs: list[Any], analyzer: Any) -> Any | None:
    """The nest and a stream call after it, or None where the pattern does not hold."""
    inner = outer.body
    if not (
        isinstance(inner, tirx.For)
        and inner.kind == tirx.ForKind.VECTORIZED
        and outer.kind == tirx.ForKind.SERIAL
        and _int(outer.min) == 0
        and _int(inner.min) == 0
    ):
        return None
    extent, width = _int(outer.extent), _int(inner.extent)
    if extent is None or width is None:
        return None
    stmts = list(inner.body.seq) if isinstance(inner.body, tirx.SeqStmt) else [inner.body]
    last = stmts[-1]
    if not isinstance(last, tirx.BufferStore) or not any(last.buffer.same_as(y) for y in outputs):
        return None
    value = last.value
    if not isinstance(value, ir.TensorLoad):
        return None
    out, row = last.buffer, value.source
    if str(row.dtype) != str(out.dtype) or len(row.shape) != 1 or len(value.indices) != 1:
        return None
    i, j = outer.loop_var, inner.loop_var
    for index in list(last.indices[:-1]):
        if _mentions(index, i) or _mentions(index, j):
            return None
    if _contiguous(last.indices[-1], i, j, width, analyzer) is None:
        return None
    if _contiguous(value.indices[0], i, j, width, analyzer) is None:
        return None
    for stmt in stmts[:-1]:
        stores: list[Any] = []
        tvm_ffi.structural_walk(stmt, (tirx.BufferStore, stores.append))
        for store in stores:
            if store.buffer.same_as(out):
                return None
            if store.buffer.same_as(row) and not tvm_ffi.structural_equal(
                list(store.indices), list(value.indices)
            ):
                return None
        if not isinstance(stmt, tirx.BufferStore):
            return None  # only plain element stores: no nested loops or calls that could write x
    dt = tvm_ffi.dtype(str(out.dtype))
    nbytes = extent * width * ((int(dt.bits) * int(dt.lanes) + 7) // 8)
    if nbytes < MIN_ROW_BYTES:
        return None
    kept = stmts[:-1]
    body = tirx.SeqStmt(kept) if len(kept) > 1 else kept[0]
    vector = tirx.For(j, inner.min, inner.extent, inner.kind, body)
    nest = tirx.For(i, outer.min, outer.extent, outer.kind, vector)
    start = analyzer.simplify(_subst_zero(value.indices[0], i, j))
    corner = [analyzer.simplify(_subst_zero(x, i, j)) for x in last.indices]
    dst = tirx.address_of(tirx.BufferLoad(out, corner))
    src = tirx.tvm_access_ptr(str(row.dtype), row, start, extent * width, 1)
    call = tirx.call_extern("int32", STREAM_STORE_SYMBOL, dst, src, tirx.const(nbytes, "int64"))
    return tirx.SeqStmt([nest, tirx.Evaluate(call)])


def stream_stores(func: Any) -> Any:
    """Write rows of large outputs with non-temporal stores (module docstring)."""
    threshold = last_level_cache_bytes()
    outputs = [
        p
        for p in func.params
        if tirx.is_buffer_var(p) and (_bytes(p) or 0) >= threshold and _untouched(func.body, p)
    ]
    if not outputs or not use_stream_stores():  # the helper library is looked up only where needed
        return func
    analyzer = tvm.sym.Analyzer()
    changed = [False]

    def on_for(loop: Any) -> Any:
        new = _rewrite_nest(loop, outputs, analyzer)
        if new is None:
            return loop
        changed[0] = True
        return new

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for))
    return func.with_body(body) if changed[0] else func


LARGE_OUTPUTS_STREAMED = Property(
    "large_outputs_streamed",
    "rows of outputs larger than the last-level cache are written with non-temporal stores",
)
STREAM_STORES = function_pass(
    stream_stores, needs={PARALLEL_LOOPS_SCHEDULED}, guarantees={LARGE_OUTPUTS_STREAMED}
)
