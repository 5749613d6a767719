"""Pass ``normalize``: put tile IR in the canonical form the later passes match on.

Needs: tile IR as the front end emits it. Guarantees:

* every tile op's regions are explicit (corner + extent per dim, as ``tile.region``)
  with constant-folded corners and extents;
* every loop's ``min`` and ``extent`` are simplified (constants folded);
* every ``T.Parallel`` loop starts at 0 (a loop ``for i in T.Parallel(a, b)`` is
  rewritten over ``i' in [0, b - a)`` with ``i = i' + a``);
* nested ``T.Parallel`` loops form one perfect nest: a parallel loop whose body is a
  one-statement sequence holding another parallel loop gets that loop as its body,
  so ``for i in T.Parallel(M): for j in T.Parallel(N)`` and
  ``T.Parallel(M, N)`` look the same.

Semantics are unchanged; running the pass twice gives the same IR.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..ops import Region, decode, op_class_of
from ._traverse import mutate
from .infer_layout import is_parallel
from .pipeline import function_pass
from .properties import NORMALIZED, TILE_OPS


def _simplify_region(region: Region, analyzer: Any) -> Region:
    return Region(
        region.buffer,
        tuple(analyzer.simplify(e) for e in region.mins),
        tuple(analyzer.simplify(e) for e in region.extents),
    )


def _normalize_op(node: Any, analyzer: Any) -> Any:
    op = decode(node.value)
    changed = False
    for name, value in list(vars(op).items()):
        if isinstance(value, Region):
            setattr(op, name, _simplify_region(value, analyzer))
            changed = True
    if not changed:
        return node
    return tirx.Evaluate(op.encode(), span=node.span)


def _single(body: Any) -> Any:
    while isinstance(body, tirx.SeqStmt) and len(body.seq) == 1:
        body = body.seq[0]
    return body


def _normalize_func(func: Any) -> Any:
    """Canonicalize regions, loop bounds and parallel nests (see module docstring)."""
    analyzer = tvm.sym.Analyzer()

    def on_for(loop: Any, m: Any) -> Any:
        lo, extent = analyzer.simplify(loop.min), analyzer.simplify(loop.extent)
        var, body = loop.loop_var, loop.body
        if is_parallel(loop):
            inner = _single(body)
            if isinstance(inner, tirx.For) and is_parallel(inner):
                body = inner
            if not (isinstance(lo, tirx.IntImm) and int(lo.value) == 0):
                shifted = tirx.Var(str(var), str(var.ty))
                body = tvm_ffi.structural_map(body, (ir.Var, lambda v: shifted + lo if v.same_as(var) else v))
                var, lo = shifted, tirx.const(0, str(var.ty))
        analyzer.bind(var, ir.Range(lo, lo + extent))
        body = m.mutate(body)
        same = body.same_as(loop.body) and var.same_as(loop.loop_var) and lo.same_as(loop.min)
        if same and extent.same_as(loop.extent):
            return loop
        annotations = dict(loop.annotations.items()) if loop.annotations is not None else None
        return tirx.For(var, lo, extent, loop.kind, body, loop.thread_binding, annotations, span=loop.span)

    def on_evaluate(node: Any, m: Any) -> Any:
        return _normalize_op(node, analyzer) if op_class_of(node.value) is not None else node

    return func.with_body(mutate(func.body, [(tirx.For, on_for), (tirx.Evaluate, on_evaluate)]))


NORMALIZE = function_pass(_normalize_func, name="normalize", needs={TILE_OPS}, guarantees={NORMALIZED})
normalize = NORMALIZE.run
