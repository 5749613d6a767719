"""CPU rule for ``T.reduce_*`` along a tile's last (contiguous) dimension: vector partials.

The generic rule folds one element at a time into the destination, a serial chain
LLVM may not reorder (floating-point adds are not associative). Here each kept row
keeps ``W`` partial accumulators (one vector lane each, ``W`` up to 64: four 512-bit
registers of float32, enough independent chains to hide the add latency):

    acc[0:W] = identity                                 (vectorized)
    for ro in range(R // W): acc[0:W] = acc[0:W] (+) src[row, ro*W : ro*W + W]
    for step in W/2, W/4, ..., 1: acc[0:step] = acc[0:step] (+) acc[step:2*step]
    dst[row] = dst[row] (+) acc[0]                      (after ``dst = identity`` when clear)
    for r in tail: dst[row] = dst[row] (+) src[row, R//W*W + r]

``max``/``min``/``absmax`` give exactly the serial result (the identity of float max is
``-inf``, as in the generic rule); sums are reassociated, as on a GPU. Reductions over
another dim, or with a symbolic or short extent, use the generic rule.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.ops import Reduce, TileOp, reduce_combine, reduce_identity, reduce_start, register_lowering
from tile.ir.ops.loops import bind_ranges, cast_to, fresh_vars, parallel_nest
from tile.ir.ops.reduce import lower_reduce_loops

MAX_PARTIALS = 64
MIN_EXTENT = 16


def _partials(extent: int) -> int:
    """Number of partial accumulators: the largest power of two <= min(extent, MAX_PARTIALS)."""
    width = 1
    while width * 2 <= min(extent, MAX_PARTIALS):
        width *= 2
    return width


def _const(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


@register_lowering(Reduce, target="cpu")
def lower_reduce_cpu(op: TileOp, ctx: Any) -> Any:
    """Vector partial accumulators for reductions over the source's last dim (module docstring)."""
    assert isinstance(op, Reduce)
    src, dst = op.src, op.dst
    extent = _const(src.extents[op.dim])
    last = len(src.buffer.shape) - 1
    if extent is None or extent < MIN_EXTENT or op.dim != len(src.extents) - 1 or op.dim > last:
        return lower_reduce_loops(op, ctx)
    kept = [e for d, e in enumerate(src.extents) if d != op.dim]
    out_vars = fresh_vars("i", len(kept))
    bind_ranges(ctx.analyzer, out_vars, kept)
    kept_dense = [v for v, e in zip(out_vars, kept, strict=True) if _const(e) != 1]
    dense_out = iter(kept_dense)
    dst_idx = [
        lo if _const(e) == 1 else lo + next(dense_out) for lo, e in zip(dst.mins, dst.extents, strict=True)
    ]

    def src_at(r: Any) -> Any:
        it = iter(out_vars)
        idx = [lo + (r if d == op.dim else next(it)) for d, lo in enumerate(src.mins)]
        return cast_to(acc_dtype, tirx.BufferLoad(src.buffer, idx))

    acc_dtype = str(dst.dtype)
    width = _partials(extent)
    chunks, tail = divmod(extent, width)
    acc = tirx.decl_buffer((width,), acc_dtype, name=f"{dst.buffer.name}_partial", scope="local")
    ro, r = tirx.Var("ro", "int32"), tirx.Var("r", "int32")
    vec, serial = tirx.ForKind.VECTORIZED, tirx.ForKind.SERIAL
    kind, current = op.kind, tirx.BufferLoad(dst.buffer, dst_idx)
    body: list[Any] = [tirx.AllocBuffer(acc)]
    v = _lane()
    body.append(tirx.For(v, 0, width, vec, tirx.BufferStore(acc, reduce_identity(kind, acc_dtype), [v])))
    v = _lane()
    fold = tirx.BufferStore(acc, reduce_combine(kind, tirx.BufferLoad(acc, [v]), src_at(ro * width + v)), [v])
    body.append(tirx.For(ro, 0, chunks, serial, tirx.For(v, 0, width, vec, fold)))
    step = width // 2
    while step >= 1:
        v = _lane()
        # the partials are plain values now: combine without re-applying abs
        pair = _merge(kind, tirx.BufferLoad(acc, [v]), tirx.BufferLoad(acc, [v + step]))
        body.append(tirx.For(v, 0, step, vec if step > 1 else serial, tirx.BufferStore(acc, pair, [v])))
        step //= 2
    start = reduce_identity(kind, acc_dtype) if op.clear else reduce_start(kind, current)
    if not start.same_as(current):
        body.append(tirx.BufferStore(dst.buffer, start, dst_idx))
    body.append(tirx.BufferStore(dst.buffer, _merge(kind, current, tirx.BufferLoad(acc, [0])), dst_idx))
    if tail:
        rest = reduce_combine(kind, current, src_at(chunks * width + r))
        body.append(tirx.For(r, 0, tail, serial, tirx.BufferStore(dst.buffer, rest, dst_idx)))
    return parallel_nest(out_vars, kept, tirx.SeqStmt(body))


def _lane() -> Any:
    """A fresh loop variable (TIR defines each variable once)."""
    return tirx.Var("v", "int32")


def _merge(kind: str, acc: Any, partial: Any) -> Any:
    """Fold an already-reduced partial into ``acc`` (``abssum``/``absmax`` partials are non-negative)."""
    plain = {"abssum": "sum", "absmax": "max", "absmax_nan": "max_nan"}.get(kind, kind)
    return reduce_combine(plain, acc, partial)
