"""A ``Program`` as a real tile kernel, through the ``@T.prim_func`` front end.

One kernel template whose ``if`` statements test Python values captured from the
program; TVMScript resolves those while parsing, so each program parses to exactly
the statements it describes (no source text is generated). The element-wise
operations are PrimExpr-building closures called from the kernel body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

import tile.lang.language as T

from .program import Program

REDUCERS = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min,
            "abssum": T.reduce_abssum, "absmax": T.reduce_absmax}
ATOMICS = {"add": T.atomic_add, "max": T.atomic_max, "min": T.atomic_min}


def _op(kind: str, constant: float, dtype: str) -> Callable[[Any], Any]:
    def const() -> Any:
        return tirx.const(int(constant) if dtype.startswith(("int", "uint")) else constant, dtype)

    if kind == "add":
        return lambda v: v + const()
    if kind == "mul":
        return lambda v: v * const()
    if kind == "max":
        return lambda v: tirx.max(v, const())
    if kind == "min":
        return lambda v: tirx.min(v, const())
    if kind == "neg":
        return lambda v: tirx.const(0, dtype) - v
    if kind == "abs":
        return lambda v: tirx.abs(v)
    if kind == "square":
        return lambda v: v * v
    raise ValueError(f"unknown element-wise operation {kind!r}")


def build_kernel(p: Program) -> Any:
    """The ``PrimFunc`` of ``p``: ``main(X, B, Y)``; ``Y`` is written (an output, or folded into
    for the atomic epilogue)."""
    dt, M, N, bm, bn = p.dtype, p.M, p.N, p.bm, p.bn
    gx, gy = p.grid
    alloc = T.alloc_shared if p.scope == "shared" else T.alloc_fragment
    steps = [_op(kind, c, dt) for kind, c in p.ops]
    identity: Callable[[Any], Any] = lambda v: v
    f0, f1, f2 = (steps + [identity] * 3)[:3]

    def chain(v: Any) -> Any:
        for step in steps:
            v = step(v)
        return v

    pipelined, stages, chunks = p.pipelined, p.stages or 0, p.chunks
    inline = p.style == "inline"
    guard_none, guard_inline, guard_named = (p.guard == g for g in ("none", "inline", "named"))
    has_ops = bool(steps)
    epilogue = p.epilogue
    reducer, atomic = REDUCERS[p.reduce_kind], ATOMICS[p.atomic_kind]
    dim, clear, init, reverse = p.dim, p.clear, p.init, p.reverse
    rlen = bn if dim == 0 else bm
    rows, _k = p.gemm_dims
    bo, trans_a, trans_b = p.bo, p.trans_a, p.trans_b
    b_shape, y_shape, y_dtype = p.b_shape, p.y_shape, p.y_dtype

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dt),  # type: ignore[valid-type]
        Bm: T.Tensor(b_shape, dt),  # type: ignore[valid-type]
        Y: T.Tensor(y_shape, y_dtype),  # type: ignore[valid-type]
    ) -> None:
        with T.Kernel(gx, gy, threads=p.threads) as (bx, by):
            W = alloc((bm, bn), dt)
            if pipelined:
                S = T.alloc_shared((bm, bn), dt)
                T.clear(W)
                for k in T.Pipelined(chunks, num_stages=stages):
                    T.copy(X[by * bm, k * bn], S)
                    for i, j in T.Parallel(bm, bn):
                        W[i, j] = W[i, j] + S[i, j]
            else:
                T.copy(X[by * bm, bx * bn], W)
            if has_ops:
                if guard_none:
                    for i, j in T.Parallel(bm, bn):
                        if inline:
                            W[i, j] = chain(W[i, j])
                        else:
                            v = W[i, j]
                            u = f0(v)
                            w = f1(u)
                            W[i, j] = f2(w)
                if guard_inline:
                    for i, j in T.Parallel(bm, bn):
                        if by * bm + i < M and bx * bn + j < N:
                            if inline:
                                W[i, j] = chain(W[i, j])
                            else:
                                v = W[i, j]
                                u = f0(v)
                                w = f1(u)
                                W[i, j] = f2(w)
                if guard_named:
                    for i, j in T.Parallel(bm, bn):
                        r = by * bm + i
                        c = bx * bn + j
                        if r < M and c < N:
                            if inline:
                                W[i, j] = chain(W[i, j])
                            else:
                                v = W[i, j]
                                u = f0(v)
                                w = f1(u)
                                W[i, j] = f2(w)
            if epilogue == "store":
                T.copy(W, Y[by * bm, bx * bn])
            if epilogue == "cumsum":
                T.cumsum(W, dim=dim, reverse=reverse)
                T.copy(W, Y[by * bm, bx * bn])
            if epilogue == "reduce":
                R = T.alloc_fragment((rlen,), dt)
                if not clear:
                    T.fill(R, init)
                reducer(W, R, dim=dim, clear=clear)
                T.copy(R, Y[by, bx, 0:rlen])
            if epilogue == "gemm":
                Bs = T.alloc_shared(b_shape, dt)
                Cf = T.alloc_fragment((rows, bo), "float32")
                T.copy(Bm, Bs)
                T.gemm(W, Bs, Cf, transpose_A=trans_a, transpose_B=trans_b, clear_accum=True)
                T.copy(Cf, Y[by, bx, 0:rows, 0:bo])
            if epilogue == "atomic":
                atomic(Y[0, 0], W)

    return main
