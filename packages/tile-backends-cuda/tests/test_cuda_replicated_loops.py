"""Replicated T.Parallel loops on CUDA: registers updated on every copy, memory once per element.

A fragment that several threads hold (the row sums a reduction leaves on every thread of
the row) binds its loops to every holder. Before the fix, an atomic into global memory
from such a loop ran once per copy (128x the right sum on an H100). These tests lower the
kernels with the backend's own pipeline and count, for every thread of a block, which
atomics it executes: only the loops and conditions around the atomic are evaluated.
"""

from __future__ import annotations

import collections
import itertools
import operator
from typing import Any

import pytest
from _cuda_lowering import lowered as _lowered
from test_cuda_compile import atomic_rows_kernel
from tvm import ir, tirx

import tile.lang.language as T

_OPS = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "FloorDiv": operator.floordiv,
    "FloorMod": operator.mod, "Min": min, "Max": max, "EQ": operator.eq, "NE": operator.ne,
    "LT": operator.lt, "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
    "And": lambda a, b: a and b, "Or": lambda a, b: a or b,
}  # fmt: skip


def _value(e: Any, env: dict[int, int]) -> int:
    kind = type(e).__name__
    if isinstance(e, tirx.IntImm):
        return int(e.value)
    if isinstance(e, ir.Var):
        return env.get(e.__chandle__(), 0)  # block indices: block 0
    if kind in _OPS:
        return int(_OPS[kind](_value(e.a, env), _value(e.b, env)))
    if kind == "Not":
        return int(not _value(e.a, env))
    if kind == "Cast":
        return _value(e.value, env)
    raise NotImplementedError(f"{kind}: {e}")


def _atomic_paths(stmt: Any, path: list[tuple[str, Any]], out: list[Any]) -> None:
    """Every ``tile::atomic_*`` call with the loops and branch conditions around it."""
    kind = type(stmt).__name__
    if kind == "SeqStmt":
        for s in stmt.seq:
            _atomic_paths(s, path, out)
    elif kind == "For":
        _atomic_paths(stmt.body, [*path, ("for", stmt)], out)
    elif kind == "IfThenElse":
        _atomic_paths(stmt.then_case, [*path, ("if", stmt.condition)], out)
        if stmt.else_case is not None:
            _atomic_paths(stmt.else_case, [*path, ("if", tirx.Not(stmt.condition))], out)
    elif kind == "AttrStmt":
        if str(stmt.attr_key) == "thread_extent" and str(stmt.node.thread_tag) == "threadIdx.x":
            path = [*path, ("thread", stmt.node.var)]
        _atomic_paths(stmt.body, path, out)
    elif kind == "Evaluate" and "atomic" in str(stmt.value):
        out.append((path, stmt.value))


def atomic_counts(func: Any, threads: int) -> collections.Counter[tuple[str, int]]:
    """How often each (buffer, flat element) is atomically updated by one block."""
    paths: list[Any] = []
    _atomic_paths(func.body, [], paths)
    assert paths, "no atomic in the lowered kernel"
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    for path, call in paths:
        address = call.args[1]
        assert type(address).__name__ == "Call"  # address_of(buffer[index])
        load = address.args[0]
        loops = [node for what, node in path if what == "for"]
        (thread,) = [node for what, node in path if what == "thread"]
        for t in range(threads):
            ranges = [range(_value(lp.min, {}), _value(lp.min, {}) + _value(lp.extent, {})) for lp in loops]
            for point in itertools.product(*ranges):
                env = {
                    thread.__chandle__(): t,
                    **{lp.loop_var.__chandle__(): n for lp, n in zip(loops, point, strict=True)},
                }
                if all(_value(cond, env) for what, cond in path if what == "if"):
                    (index,) = load.indices
                    counts[(str(load.source.name), _value(index, env))] += 1
    return counts


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_atomic_row_sums_update_each_row_once_per_block(arch):
    func = _lowered(atomic_rows_kernel(256, 512), arch)
    counts = atomic_counts(func, 128)
    # block (0, 0) adds its 32 row sums into Out[0:32], each exactly once
    assert counts == {("Out", row): 1 for row in range(32)}


def test_atomic_of_a_replicated_row_vector_from_mma_rows_is_once_per_row():
    # the row vector a reduction of an mma accumulator leaves: every row on 8 threads
    M, N, K = 64, 64, 32

    @T.prim_func
    def rows(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), Out: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((N, K), "float16")
            c = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.clear(c)
            T.gemm(a, b, c, transpose_B=True)
            T.reduce_sum(c, s, dim=1)
            for i in T.Parallel(M):
                s[i] = s[i] * 2.0
            T.atomic_add(Out[bx * M], s)

    counts = atomic_counts(_lowered(rows), 128)
    assert counts == {("Out", row): 1 for row in range(M)}


def row_max_kernel(rows: int, cols: int):
    """A row statistic (replicated over the threads of its rows) filled, reduced and stored."""

    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Out: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=128) as _:
            tile = T.alloc_fragment((rows, cols), "float32")
            stat = T.alloc_fragment((rows,), "float32")
            T.copy(X, tile)
            T.fill(stat, -3.0)
            T.reduce_max(tile, stat, dim=1, clear=False)
            T.copy(stat, Out)

    return main


def test_fill_of_a_replicated_fragment_stores_each_local_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each thread stores its own locals (every replica fills its copy), not one store per
    # element of the block: the 64 rows used to give 64 stores per thread
    import numpy as np

    import tile.lang as tilelang

    monkeypatch.setenv("TILE_DEVICE", "emu")
    func = row_max_kernel(64, 32)
    kernel = tilelang.compile(func, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    source = kernel.get_kernel_source("cuda")
    import re

    (locals_,) = re.findall(r"float stat_ptr\[(\d+)\];", source)
    fills = [line for line in source.splitlines() if "= -0x1.8p+1f" in line]
    assert int(locals_) < 64 and len(fills) == int(locals_), fills
    x = np.random.default_rng(0).uniform(-5.0, 1.0, (64, 32)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x), np.maximum(x.max(axis=1), -3.0))
