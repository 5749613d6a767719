"""Pass ``vectorize_parallel_loops``: schedule ``T.Parallel`` loops for a single thread.

For targets that run a whole block on one core (the CPU). Needs: ``T.Parallel``
loops as ``For`` nodes with the ``tile.parallel`` annotation (from the front end or
from ``lower_tile_ops``). Guarantees: no ``tile.parallel`` annotation is left; the
innermost loop of each parallel nest becomes a ``vectorized`` loop when its extent
is a constant that fits in a few vector registers and its body is ``vector_safe``
(no nested loop, no per-iteration scalar local), and every other parallel loop
becomes ``serial``. Iterations are independent, so this order is always valid.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

from ..annotations import PARALLEL_LOOP
from .pipeline import CompileContext, Pass, map_prim_funcs

MAX_VECTOR_LANES = 64
"""Longest loop turned into one vector operation; longer loops stay serial for LLVM to vectorize."""


def _contains_loop(body: Any) -> bool:
    hit = tvm_ffi.structural_walk(body, (tirx.For, lambda _: tvm_ffi.VisitInterrupt(True)))
    return hit is not None


def vector_safe(body: Any) -> bool:
    """Whether TVM's vectorizer handles ``body`` correctly as one vector lane group.

    A scalar local in a loop body (``x = A[i] * 2``) is a one-element buffer allocated
    per iteration (or a ``Bind`` that apache-tvm 0.27 flattens into one); its vectorizer
    gives all lanes that single slot, so each lane would read lane 0's value. Such
    bodies stay serial loops (LLVM's own loop vectorizer still applies to them).
    """
    per_iteration = (tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer)
    hit = tvm_ffi.structural_walk(body, [(t, lambda _: tvm_ffi.VisitInterrupt(True)) for t in per_iteration])
    return hit is None and not _contains_loop(body)


def without(annotations: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """``annotations`` as a dict, minus ``keys``."""
    if annotations is None:
        return {}
    return {str(k): v for k, v in annotations.items() if str(k) not in keys}


def _schedule(func: Any) -> Any:
    def on_for(loop: Any, m: Any) -> Any:
        body = m.mutate(loop.body)
        if loop.annotations is None or PARALLEL_LOOP not in [str(k) for k in loop.annotations]:
            if body.same_as(loop.body):
                return loop
            return tirx.For(
                loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations
            )
        extent = loop.extent
        vectorize = (
            isinstance(extent, tirx.IntImm)
            and 1 < int(extent.value) <= MAX_VECTOR_LANES
            and vector_safe(body)
        )
        kind = tirx.ForKind.VECTORIZED if vectorize else tirx.ForKind.SERIAL
        return tirx.For(
            loop.loop_var, loop.min, extent, kind, body, None, without(loop.annotations, (PARALLEL_LOOP,))
        )

    return func.with_body(tvm_ffi.structural_mutate(func.body, (tirx.For, on_for)))


def vectorize_parallel_loops(mod: Any, ctx: CompileContext) -> Any:
    """Make ``T.Parallel`` loops serial, with a vectorized innermost loop (see module docstring)."""
    return map_prim_funcs(mod, _schedule)


VECTORIZE_PARALLEL_LOOPS = Pass("vectorize_parallel_loops", vectorize_parallel_loops)
