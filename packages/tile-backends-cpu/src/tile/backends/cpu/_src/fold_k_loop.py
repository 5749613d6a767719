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

A ``T.clear(C)`` (a zero ``T.fill`` of the whole accumulator) directly before such a
folded gemm into the whole of ``C`` becomes the gemm's ``clear_accum``: the
micro-kernel then starts its accumulator tiles at zero instead of the program zeroing
``C`` in memory and the kernel loading it back (in the 2048^3 bf16 GEMM, 256 KiB
written and read again per 256 x 256 block).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.ops import Copy, Fill, Gemm
from tile.ir.ops.base import decode, op_class_of
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


def _whole(region: Region) -> bool:
    """Whether ``region`` is all of its buffer."""
    shape = tuple(region.buffer.shape)
    return len(region.mins) == len(shape) and all(
        isinstance(lo, tirx.IntImm) and int(lo.value) == 0 for lo in region.mins
    ) and _same(region.extents, shape)


def _zero_fill_of_whole(stmt: Any) -> Any:
    """The buffer a statement ``T.fill``s with zero in whole, else None."""
    if not (isinstance(stmt, tirx.Evaluate) and op_class_of(stmt.value) is Fill):
        return None
    fill = decode(stmt.value)
    assert isinstance(fill, Fill)
    value = fill.value
    if not isinstance(value, tirx.IntImm | tirx.FloatImm) or float(value.value) != 0.0:
        return None
    if not _whole(fill.dst):
        return None
    return fill.dst.buffer


def _fold_clears(body: Any, folded: list[Any]) -> Any:
    """``T.clear(C); <folded gemm into all of C>`` -> the gemm with ``clear_accum`` (module docstring)."""

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        out: list[Any] = []
        i = 0
        while i < len(stmts):
            cleared = _zero_fill_of_whole(stmts[i])
            nxt = stmts[i + 1] if i + 1 < len(stmts) else None
            if cleared is not None and nxt is not None and any(nxt.same_as(f) for f in folded):
                gemm = _op(nxt)
                if isinstance(gemm, Gemm) and gemm.c.buffer.same_as(cleared) and _whole(gemm.c):
                    cleared_gemm = Gemm(
                        a=gemm.a,
                        b=gemm.b,
                        c=gemm.c,
                        transpose_a=gemm.transpose_a,
                        transpose_b=gemm.transpose_b,
                        clear_accum=True,
                        policy=gemm.policy,
                    )
                    out.append(tirx.Evaluate(cleared_gemm.encode()))
                    i += 2
                    continue
            out.append(stmts[i])
            i += 1
        return seq if len(out) == len(stmts) else tirx.SeqStmt(out)

    return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq))


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
        evaluated = tirx.Evaluate(folded.encode())
        folded_stmts.append(evaluated)
        return evaluated

    folded_stmts: list[Any] = []
    mapped = tvm_ffi.structural_map(body, (tirx.For, on_for))
    return func.with_body(_fold_clears(mapped, folded_stmts) if folded_stmts else mapped)


K_LOOPS_FOLDED = Property(
    "k_loops_folded",
    "a K loop that only stages bf16 gemm tiles is one gemm over the whole K range",
)
FOLD_K_LOOP = function_pass(fold_k_loop, needs={NORMALIZED, TILE_OPS}, guarantees={K_LOOPS_FOLDED})
