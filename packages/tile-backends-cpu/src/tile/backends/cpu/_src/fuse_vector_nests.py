"""Pass ``fuse_vector_nests``: a producer loop and the reduction that reads it, as one pass.

After ``vectorize_parallel_loops`` a row-wise kernel (softmax, RMSNorm) is, per row, a
sequence of strip-mined vector nests over the same range::

    for o in range(64): for v in vectorized(64): x[o*64 + v] = X[row, o*64 + v]
    for v in vectorized(64): max_partial[v] = -inf
    for o in range(64): for v in vectorized(64): max_partial[v] = max(max_partial[v], x[o*64 + v])
    for o in range(64): for v in vectorized(64): x[o*64 + v] = exp(x[o*64 + v] - row_max)
    ...

``fuse_fragment_loops`` cannot merge these: the reduction's partial loop was never a
``T.Parallel`` loop. Each nest streams the row through L1 again, and for a memory-bound
kernel the loads and stores are the cost. This pass merges adjacent nests with the same
shape (the same serial/vectorized loop kinds, mins and extents, one or two levels deep)
when that is exact:

* every buffer that one nest writes and the other touches is accessed, in both nests,
  at one and the same index, and that index is injective over the nest's iterations
  (an affine ``a * o + b * v + c`` with ``|a| >= |b| * extent(v)`` or the reverse, in
  at least one dimension). Iteration ``(o, v)`` of the second nest then reads exactly
  what iteration ``(o, v)`` of the first wrote, and nothing another iteration writes;
* buffers only the second nest writes (a reduction's partials, indexed by ``v``) are
  updated in their original order, so the float result is bit-identical;
* statements between the two that share no written buffer with the first nest (the
  partials' allocation and initialization) move in front of it, as in
  ``fuse_fragment_loops``.

The softmax row then takes three passes (load + max, exp + sum, scale + store) instead
of five. Bodies with accesses the analysis cannot see are never fused.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import PARALLEL_LOOPS_SCHEDULED

from . import fuse_fragment_loops as fragment_fusion
from .fuse_fragment_loops import Access, _flat, _uses_any, summarize

_LOOP_KINDS = (tirx.ForKind.SERIAL, tirx.ForKind.VECTORIZED)


def _prelude(outer: Any) -> tuple[list[Any], Any]:
    """The allocations that open a two-level nest's outer body, and the statement after them.

    ``vectorize_parallel_loops`` gives a local of a vectorized body one slot per lane
    (``x_lanes``), allocated per outer iteration ahead of the vectorized loop.
    """
    items = _flat(outer.body)
    allocs = items[:-1]
    if all(isinstance(a, tirx.AllocBuffer) for a in allocs):
        return allocs, items[-1]
    return [], outer.body


def _levels(stmt: Any) -> list[Any] | None:
    """The loops of a one- or two-level nest whose innermost loop is vectorized, else None.

    The outer loop's body is the vectorized loop, after allocations only (``_prelude``).
    """
    if not isinstance(stmt, tirx.For) or stmt.thread_binding is not None or stmt.kind not in _LOOP_KINDS:
        return None
    if stmt.kind == tirx.ForKind.VECTORIZED:
        return [stmt]
    inner = _prelude(stmt)[1]
    if isinstance(inner, tirx.For) and inner.kind == tirx.ForKind.VECTORIZED and inner.thread_binding is None:
        return [stmt, inner]
    return None


def _same_shape(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        x.kind == y.kind
        and tvm_ffi.structural_equal(x.min, y.min)
        and tvm_ffi.structural_equal(x.extent, y.extent)
        for x, y in zip(a, b, strict=True)
    )


def _const(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _injective(index: Any, loops: list[Any]) -> bool:
    """Whether ``index`` takes a different value at every iteration of ``loops`` (affine check)."""
    variables = [loop.loop_var for loop in loops]
    extents = [_const(loop.extent) for loop in loops]
    if any(e is None for e in extents):
        return False
    coeffs = list(tvm.sym.detect_linear_equation(index, variables))
    if len(coeffs) != len(variables) + 1:
        return False
    c = [_const(x) for x in coeffs[:-1]]
    if any(x is None for x in c):
        return False
    if len(variables) == 1:
        return c[0] != 0 or extents[0] == 1
    (ca, cb), (ea, eb) = c, extents
    assert ca is not None and cb is not None and ea is not None and eb is not None
    if cb != 0 and abs(ca) >= abs(cb) * eb:
        return True
    return ca != 0 and abs(cb) >= abs(ca) * ea


def _exact_for(group: list[Access], loops: list[Any]) -> bool:
    """All accesses use one index, injective over the nest (module docstring, first rule)."""
    first = group[0].indices
    for access in group[1:]:
        if len(access.indices) != len(first):
            return False
        if not all(tvm_ffi.structural_equal(x, y) for x, y in zip(access.indices, first, strict=True)):
            return False
    return any(_injective(index, loops) for index in first)


def _rename(body: Any, pairs: list[tuple[Any, Any]]) -> Any:
    def on_var(v: Any) -> Any:
        for old, new in pairs:
            if v.same_as(old):
                return new
        return v

    return tvm_ffi.structural_map(body, (ir.Var, on_var))


def try_fuse(first: Any, second: Any, aliased: tuple[Any, ...] = ()) -> Any | None:
    """``first`` and ``second`` as one nest, or None when that is not exact (module docstring)."""
    a_loops, b_loops = _levels(first), _levels(second)
    if a_loops is None or b_loops is None or not _same_shape(a_loops, b_loops):
        return None
    pairs = [(y.loop_var, x.loop_var) for x, y in zip(a_loops, b_loops, strict=True)]
    a_body, b_body = a_loops[-1].body, _rename(b_loops[-1].body, pairs)
    a, b = summarize(a_body, aliased), summarize(b_body, aliased)
    if a.opaque or b.opaque or a.bound or b.bound:
        return None
    shared = [d for d in [*a.writes(), *b.writes()] if a.touches(d) and b.touches(d)]
    for buffer in shared:
        group = [x for x in [*a.accesses, *b.accesses] if x.buffer.same_as(buffer)]
        if not _exact_for(group, a_loops):
            return None
    body = tirx.SeqStmt([*_flat(a_body), *_flat(b_body)])
    prelude = [*_prelude(first)[0], *(_rename(a, pairs[:1]) for a in _prelude(second)[0])]
    return _nest(a_loops, prelude, body)


def _nest(levels: list[Any], prelude: list[Any], body: Any) -> Any:
    """The nest of ``levels`` around ``body``, the outer body opening with ``prelude`` (two levels)."""
    inner = levels[-1]
    nest = tirx.For(inner.loop_var, inner.min, inner.extent, inner.kind, body, None, inner.annotations)
    if len(levels) == 1:
        return nest
    outer = levels[0]
    return tirx.For(outer.loop_var, outer.min, outer.extent, outer.kind, _seq([*prelude, nest]), None,
                    outer.annotations)


def fuse_sequence(stmts: list[Any], aliased: tuple[Any, ...] = ()) -> list[Any]:
    """Fuse adjacent vector nests of one statement sequence."""
    return fragment_fusion.fuse_sequence(stmts, aliased, try_fuse, lambda s: _levels(s) is not None)


def forward_sequence(stmts: list[Any], aliased: tuple[Any, ...] = ()) -> list[Any]:
    """Values that a nest stores into a local and reads back in the same iteration, kept per lane.

    Once a producer nest and the reduction reading it are one nest, each iteration stores
    ``x[i] = e`` and later reads ``x[i]`` back; nothing else reads ``x``. When ``x`` is a
    local allocated in this sequence, used by that one nest only, stored at the top of its
    body at an index injective over the nest and read only at that index after the store,
    ``x`` becomes ``x_lanes[v]``, one slot per lane of the vectorized loop ``v``, allocated
    per outer iteration as ``vectorize_parallel_loops`` does for a body's locals (a ``Bind``
    would give all lanes one slot in apache-tvm 0.27's vectorizer). LLVM keeps such a small
    array in vector registers instead of writing and re-reading a row of memory: a
    reduction's partials then accumulate straight from the producer's expression.
    """
    out = list(stmts)
    for alloc in [s for s in stmts if isinstance(s, tirx.AllocBuffer)]:
        buffer = alloc.buffer
        if not str(buffer.scope()).startswith("local") or any(buffer.same_as(b) for b in aliased):
            continue
        user = _only_user(out, buffer)
        if user is None or user < out.index(alloc):
            continue
        nest = out[user]
        levels = _levels(nest)
        if levels is None or _const(levels[-1].extent) is None:
            continue
        forwarded = _forward_in(levels, buffer, aliased)
        if forwarded is None:
            continue
        lanes, body = forwarded
        if len(levels) == 1:
            out[user] = _seq([tirx.AllocBuffer(lanes), _nest(levels, [], body)])
        else:
            out[user] = _nest(levels, [*_prelude(nest)[0], tirx.AllocBuffer(lanes)], body)
        out.remove(alloc)
    return out


def _only_user(stmts: list[Any], buffer: Any) -> int | None:
    """The position of the one statement besides allocations that names ``buffer``, else None.

    Any mention counts: a view declared over the buffer (``T.reshape``) names it in its data.
    """
    found = None
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, tirx.AllocBuffer) and _uses_any(stmt, [buffer]):
            if found is not None:
                return None
            found = i
    return found


def _forward_in(levels: list[Any], buffer: Any, aliased: tuple[Any, ...]) -> tuple[Any, Any] | None:
    """A lanes buffer for ``buffer`` and the innermost body reading and writing it, or None."""
    inner = levels[-1]
    if summarize(inner.body, aliased).opaque:  # an address taken, an extern call: not analysable
        return None
    body = _flat(inner.body)
    touching = [i for i, s in enumerate(body) if summarize(s, aliased).touches(buffer)]
    if not touching:
        return None
    first = body[touching[0]]
    if not isinstance(first, tirx.BufferStore) or not first.buffer.same_as(buffer):
        return None
    if summarize(tirx.Evaluate(first.value), aliased).touches(buffer):
        return None
    index = tuple(first.indices)
    if not any(_injective(x, levels) for x in index):
        return None
    if all(x.same_as(inner.loop_var) or _const(x) is not None for x in index):
        return None  # one slot per lane already
    for i in touching[1:]:
        for access in summarize(body[i], aliased).accesses:
            if access.buffer.same_as(buffer) and (
                access.write
                or not all(tvm_ffi.structural_equal(x, y) for x, y in zip(access.indices, index, strict=True))
            ):
                return None
    extent = _const(inner.extent)
    lanes = tirx.decl_buffer((extent,), buffer.dtype, name=f"{buffer.name}_lanes", scope="local")
    lane = [inner.loop_var]

    def on_load(load: Any) -> Any:
        return tirx.BufferLoad(lanes, lane) if load.source.same_as(buffer) else load

    rest = [tvm_ffi.structural_map(s, (ir.TensorLoad, on_load)) for s in body[touching[0] + 1 :]]
    store = tirx.BufferStore(lanes, first.value, lane)
    return lanes, _seq([*body[: touching[0]], store, *rest])


def _seq(stmts: list[Any]) -> Any:
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def fuse_vector_nests(func: Any) -> Any:
    """Merge adjacent same-shape vector nests where exact, then forward what they store and
    read back in one iteration (module docstring)."""

    def fuse_then_forward(stmts: list[Any], aliased: tuple[Any, ...]) -> list[Any]:
        return forward_sequence(fuse_sequence(stmts, aliased), aliased)

    return fragment_fusion.map_sequences(func, fuse_then_forward)


VECTOR_NESTS_FUSED = Property(
    "vector_nests_fused",
    "adjacent vector nests over one range that read what the other wrote run as one",
)
FUSE_VECTOR_NESTS = function_pass(
    fuse_vector_nests, needs={PARALLEL_LOOPS_SCHEDULED}, guarantees={VECTOR_NESTS_FUSED}
)
