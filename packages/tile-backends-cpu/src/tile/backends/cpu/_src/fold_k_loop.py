"""Pass ``fold_k_loop``: a K loop that only stages tiles for a bf16 gemm becomes one gemm over all of K.

The GPU GEMM walks K in ``block_K`` steps: copy an A tile and a B tile to shared
memory, ``T.gemm`` them into the accumulator. On the CPU, where bf16 tile products
call the C micro-kernel (ukernels.py), each step reloads the whole accumulator tile
from memory for only ``block_K`` products, and the staging copies widen bf16 to
float32. When a loop's body is exactly ``T.copy(GA[.. k ..], A_s)``,
``T.copy(GB[.. k ..], B_s)``, ``T.gemm(A_s, B_s, C)`` (any order of the copies), the
staged buffers are used nowhere else, the source regions are global, bf16, whole
tiles inside their tensors for every ``k``, and they advance by exactly one tile
along K per iteration, the loop is replaced by one ``T.gemm`` reading the global
operands in place over the loop's whole K range. Anything else is left as written.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.ops import Copy, Gemm
from tile.ir.ops.region import Region
from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import NORMALIZED, TILE_OPS

from .read_in_place import _inside, _mentions, _op, _ranges, _same, _uses
from .ukernels import use_bf16_gemm_ukernel


def _subst(expr: Any, var: Any, value: Any) -> Any:
    return tvm_ffi.structural_map(expr, (ir.Var, lambda v: value if v.same_as(var) else v))


def _zero(analyzer: Any, expr: Any) -> bool:
    simple = analyzer.simplify(expr)
    return isinstance(simple, tirx.IntImm) and int(simple.value) == 0


def _k_dim(src: Region, k: Any, block_k: Any, analyzer: Any) -> int | None:
    """The one dim of ``src`` whose corner moves by its extent (== block_k) per step of ``k``."""
    found = None
    for d, (lo, extent) in enumerate(zip(src.mins, src.extents, strict=True)):
        step = _subst(lo, k, k + 1) - lo
        if _zero(analyzer, step):
            continue
        if found is not None or not _zero(analyzer, step - extent) or not _zero(analyzer, extent - block_k):
            return None
        found = d
    return found


def _whole_k(src: Region, dim: int, k: Any, start: Any, trips: Any, analyzer: Any) -> Region:
    mins = list(src.mins)
    mins[dim] = analyzer.simplify(_subst(mins[dim], k, start))
    extents = list(src.extents)
    extents[dim] = extents[dim] * trips
    return Region(buffer=src.buffer, mins=tuple(mins), extents=tuple(extents))


def fold_k_loop(func: Any) -> Any:
    """Fold staging K loops of bf16 gemms into one in-place gemm (see the module docstring)."""
    analyzer = _ranges(func)
    body = func.body

    def on_for(loop: Any) -> Any:
        stmts = list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
        if len(stmts) != 3 or not isinstance(loop.extent, tirx.IntImm):
            return loop
        ops = [_op(s) for s in stmts]
        gemm = ops[2]
        if not isinstance(gemm, Gemm) or gemm.clear_accum or not all(isinstance(o, Copy) for o in ops[:2]):
            return loop
        if not (gemm.a.dtype == gemm.b.dtype == "bfloat16" and gemm.c.dtype == "float32"):
            return loop
        if not use_bf16_gemm_ukernel():  # asked only here: it builds the library on first use
            return loop
        k = loop.loop_var
        if _mentions(stmts[2], k):
            return loop
        block_k = gemm.mnk[2]
        sources = {}
        for copy in ops[:2]:
            staged = copy.dst.buffer
            src = copy.src
            if staged.same_as(gemm.a.buffer):
                role, view = "a", gemm.a
            elif staged.same_as(gemm.b.buffer):
                role, view = "b", gemm.b
            else:
                return loop
            if (
                role in sources
                or src.scope not in ("global", "")
                or src.dtype != "bfloat16"
                or copy.dst.dtype != "bfloat16"
                or not _same(copy.dst.extents, tuple(staged.shape))
                or not _same(view.extents, tuple(staged.shape))
                or not _same(src.extents, copy.dst.extents)
                or _uses(body, staged) != 2
                or not _inside(src, analyzer)
            ):
                return loop
            dim = _k_dim(src, k, block_k, analyzer)
            if dim is None:
                return loop
            # The K dim of the tile must be the dim the gemm contracts over.
            dense = [
                d for d, e in enumerate(src.extents) if not (isinstance(e, tirx.IntImm) and int(e.value) == 1)
            ]
            if len(dense) != 2 or dim not in dense:
                return loop
            if role == "b":
                contracting = dense[0] if not gemm.transpose_b else dense[1]
            else:
                contracting = dense[1] if not gemm.transpose_a else dense[0]
            if dim != contracting:
                return loop
            sources[role] = _whole_k(src, dim, k, loop.min, loop.extent, analyzer)
        folded = Gemm(
            a=sources["a"],
            b=sources["b"],
            c=gemm.c,
            transpose_a=gemm.transpose_a,
            transpose_b=gemm.transpose_b,
            clear_accum=False,
            policy=gemm.policy,
        )
        return tirx.Evaluate(folded.encode())

    return func.with_body(tvm_ffi.structural_map(body, (tirx.For, on_for)))


K_LOOPS_FOLDED = Property(
    "k_loops_folded",
    "a K loop that only stages bf16 gemm tiles is one gemm over the whole K range",
)
FOLD_K_LOOP = function_pass(fold_k_loop, needs={NORMALIZED, TILE_OPS}, guarantees={K_LOOPS_FOLDED})
