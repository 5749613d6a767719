"""Dynamic tails: a guard-free main path plus the predicated tail, checked on the CPU."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.backend import Capabilities
from tile.ir.ops import Copy
from tile.ir.target import Target
from tile.ir.transform import (
    CompileContext,
    bind_parallel_loops,
    lower_tile_ops,
    serialize_block_grid,
    split_dynamic_tails,
)

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))


def scale_kernel(rows=None):
    """B[n, 16] = A[n, 16] * 2 through a fragment, 32 rows per block, n symbolic by default."""
    n = tirx.Var("n", "int32") if rows is None else tirx.const(rows, "int32")
    A = tirx.decl_buffer((n, 16), "float32", name="A")
    B = tirx.decl_buffer((n, 16), "float32", name="B")
    F = tirx.decl_buffer((32, 16), "float32", name="F", scope="local.fragment")
    bx = tirx.Var("bx", "int32")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    double = tirx.BufferStore(F, tirx.BufferLoad(F, [i, j]) * 2.0, [i, j])
    body = tirx.SeqStmt(
        [
            tirx.AllocBuffer(F),
            tirx.Evaluate(Copy.build(tirx.BufferLoad(A, [bx * 32, 0]), F).encode()),
            tirx.For(i, 0, 32, tirx.ForKind.SERIAL, tirx.For(j, 0, 16, tirx.ForKind.SERIAL, double)),
            tirx.Evaluate(Copy.build(F, tirx.BufferLoad(B, [bx * 32, 0])).encode()),
        ]
    )
    grid = tirx.floordiv(n + 31, 32)
    body = tirx.AttrStmt(tirx.IterVar(ir.Range(0, grid), bx, 1, "blockIdx.x"), "thread_extent", grid, body)
    func = tirx.PrimFunc([A, B], body).with_attr("global_symbol", "k")
    return tvm.IRModule({"k": func})


def test_guarded_copies_split_into_main_and_tail():
    lowered = lower_tile_ops(scale_kernel(), CTX)
    split = split_dynamic_tails(lowered, CTX)
    assert tvm.tirx.analysis.verify_well_formed(split["k"], False)  # both branches stay SSA
    branches = []
    tvm_ffi.structural_walk(split["k"].body, (tirx.IfThenElse, branches.append), order="pre")
    outer = [b for b in branches if isinstance(b.then_case, tirx.For)]
    assert len(outer) == 2  # the load from A and the store into B
    for branch in outer:
        assert "bx * 32 + 31 < n" in str(branch.condition) or "bx * 32 + 32 <= n" in str(branch.condition)
        inner_guards = []
        tvm_ffi.structural_walk(branch.then_case, (tirx.IfThenElse, inner_guards.append))
        assert not inner_guards and "if_then_else" not in str(branch.then_case)
        assert isinstance(branch.else_case, tirx.For)  # the original, predicated nest


@pytest.mark.parametrize("n", [5, 64, 70])
def test_split_kernel_matches_numpy(n):
    mod = lower_tile_ops(scale_kernel(), CTX)
    for step in (split_dynamic_tails, bind_parallel_loops, serialize_block_grid):
        mod = step(mod, CTX)
    kernel = tvm.compile(mod, target="llvm")["k"]
    a = np.random.default_rng(n).standard_normal((n, 16)).astype("float32")
    b = np.full((n, 16), -1.0, "float32")
    kernel(a, b)
    np.testing.assert_allclose(b, a * 2.0, rtol=1e-6)


def test_unguarded_nests_are_left_alone():
    mod = lower_tile_ops(scale_kernel(rows=64), CTX)  # 64 = 2 * 32: no guards at all
    tvm.ir.assert_structural_equal(split_dynamic_tails(mod, CTX), mod)
