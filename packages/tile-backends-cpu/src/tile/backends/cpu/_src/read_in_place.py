"""Pass ``read_in_place``: a gemm operand whose every element is used once skips its staging copy.

A GPU program stages each operand tile in shared memory (``T.copy(W[...], W_shared)``
then ``T.gemm(x_shared, W_shared, y)``) because global memory is far away. On a CPU
"shared memory" is ordinary memory too, and staging pays off only when the tile is
reused: the B tile of a gemm is read once per row of C, so with a single row (a
GEMV, ``M == 1``) every element is used exactly once and the copy just doubles the
memory traffic of a memory-bound kernel. This pass lets such a gemm read the global
tile directly and drops the copy.

It applies when, in one statement sequence, ``T.copy(G[region], S)`` is followed by
``T.gemm(_, S, C)`` with a static ``M == 1``, ``S`` is touched by nothing else in
the function, the copy fills the whole of ``S`` with the same extents and element
type (no conversion), nothing in between touches ``G``, and the region is provably
inside ``G`` for every block and loop iteration (a tail tile needs the copy's
zero-filling guards, so it keeps the copy). Anything else is left as written.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.ops import Copy, Gemm
from tile.ir.ops.base import decode, op_class_of
from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import NORMALIZED, TILE_OPS


def _op(stmt: Any) -> Any:
    if isinstance(stmt, tirx.Evaluate) and op_class_of(stmt.value) in (Copy, Gemm):
        return decode(stmt.value)
    return None


def _mentions(node: Any, var: Any) -> bool:
    hit = tvm_ffi.structural_walk(
        node, (ir.Var, lambda v: tvm_ffi.VisitInterrupt(True) if v.same_as(var) else None)
    )
    return bool(hit is not None and getattr(hit, "value", hit) is True)


def _uses(body: Any, var: Any) -> int:
    """How many tile-op calls and plain buffer accesses name ``var``."""
    count = [0]

    def on_call(call: Any) -> Any:
        if op_class_of(call) is None:
            return None
        count[0] += _mentions(call, var)
        return tvm_ffi.WalkResult.SKIP

    def on_load(load: Any) -> None:
        count[0] += load.source.same_as(var)

    def on_store(store: Any) -> None:
        count[0] += store.buffer.same_as(var)

    tvm_ffi.structural_walk(
        body, [(ir.Call, on_call), (ir.TensorLoad, on_load), (tirx.BufferStore, on_store)], order="pre"
    )
    return count[0]


def _ranges(func: Any) -> Any:
    """An analyzer with every loop and block variable of ``func`` bound to its range."""
    analyzer = tvm.sym.Analyzer()

    def on_for(loop: Any) -> None:
        analyzer.bind(loop.loop_var, ir.Range.from_min_extent(loop.min, loop.extent))

    def on_attr(attr: Any) -> None:
        if str(attr.attr_key) == "thread_extent":
            analyzer.bind(attr.node.var, ir.Range.from_min_extent(0, attr.value))

    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for), (tirx.AttrStmt, on_attr)])
    return analyzer


def _inside(region: Any, analyzer: Any) -> bool:
    for lo, extent, size in zip(region.mins, region.extents, region.shape, strict=True):
        if not (analyzer.can_prove(lo >= 0) and analyzer.can_prove(lo + extent <= size)):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b, strict=True))


def read_in_place(func: Any) -> Any:
    """Drop the staging copy of single-use gemm operands (see the module docstring)."""
    analyzer = _ranges(func)
    body = func.body

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        changed = False
        for gi, stmt in enumerate(stmts):
            gemm = _op(stmt)
            if not isinstance(gemm, Gemm) or gemm.transpose_b:
                continue
            m = gemm.mnk[0]
            if not (isinstance(m, tirx.IntImm) and int(m.value) == 1):
                continue
            staged = gemm.b.buffer
            for ci in range(gi - 1, -1, -1):
                copy = _op(stmts[ci])
                if not (isinstance(copy, Copy) and copy.dst.buffer.same_as(staged)):
                    continue
                src = copy.src
                if (
                    src.scope not in ("global", "")
                    or src.dtype != copy.dst.dtype
                    or not _same(copy.dst.extents, tuple(staged.shape))
                    or not _same(gemm.b.extents, tuple(staged.shape))
                    or not _same(src.extents, copy.dst.extents)
                    or _uses(body, staged) != 2
                    or any(_mentions(s, src.buffer) for s in stmts[ci + 1 : gi])
                    or not _inside(src, analyzer)
                ):
                    break
                direct = Gemm(
                    a=gemm.a,
                    b=src,
                    c=gemm.c,
                    transpose_a=gemm.transpose_a,
                    transpose_b=gemm.transpose_b,
                    clear_accum=gemm.clear_accum,
                    policy=gemm.policy,
                )
                stmts[gi] = tirx.Evaluate(direct.encode())
                stmts[ci] = tirx.Evaluate(tirx.const(0, "int32"))
                changed = True
                break
        return tirx.SeqStmt(stmts) if changed else seq

    return func.with_body(tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq)))


SINGLE_USE_OPERANDS_UNSTAGED = Property(
    "single_use_operands_unstaged",
    "an M == 1 gemm reads its once-used B tile from global memory, without the staging copy",
)
READ_IN_PLACE = function_pass(
    read_in_place, needs={NORMALIZED, TILE_OPS}, guarantees={SINGLE_USE_OPERANDS_UNSTAGED}
)
