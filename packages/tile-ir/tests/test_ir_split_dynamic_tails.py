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


def kernel_module(params, n, bx, body):
    """Kernel ``k`` running ``body`` in each of ``ceil(n / 32)`` blocks ``bx``."""
    grid = tirx.floordiv(n + 31, 32)
    body = tirx.AttrStmt(tirx.IterVar(ir.Range(0, grid), bx, 1, "blockIdx.x"), "thread_extent", grid, body)
    return tvm.IRModule({"k": tirx.PrimFunc(params, body).with_attr("global_symbol", "k")})


def assert_doubles(split, n):
    """Finish the CPU pipeline on ``split`` and check that the kernel writes B = 2 * A for ``n`` rows."""
    mod = split
    for step in (bind_parallel_loops, serialize_block_grid):
        mod = step(mod, CTX)
    kernel = tvm.compile(mod, target="llvm")["k"]
    a = np.random.default_rng(n).standard_normal((n, 16)).astype("float32")
    b = np.full((n, 16), -1.0, "float32")
    kernel(a, b)
    np.testing.assert_allclose(b, a * 2.0, rtol=1e-6)


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
    return kernel_module([A, B], n, bx, body)


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
    assert_doubles(split_dynamic_tails(lower_tile_ops(scale_kernel(), CTX), CTX), n)


def test_unguarded_nests_are_left_alone():
    mod = lower_tile_ops(scale_kernel(rows=64), CTX)  # 64 = 2 * 32: no guards at all
    tvm.ir.assert_structural_equal(split_dynamic_tails(mod, CTX), mod)


def local_in_nest_kernel():
    """B = 2 * A (n, 16) through a per-iteration local buffer allocated inside the guarded nest."""
    n = tirx.Var("n", "int32")
    A = tirx.decl_buffer((n, 16), "float32", name="A")
    B = tirx.decl_buffer((n, 16), "float32", name="B")
    t = tirx.decl_buffer((1,), "float32", name="t", scope="local")
    bx, i, j = (tirx.Var(name, "int32") for name in ("bx", "i", "j"))
    row = bx * 32 + i
    zero = tirx.const(0, "int32")
    body = tirx.SeqStmt(
        [
            tirx.AllocBuffer(t),
            tirx.BufferStore(t, tirx.if_then_else(row < n, tirx.BufferLoad(A, [row, j]), 0.0), [zero]),
            tirx.IfThenElse(row < n, tirx.BufferStore(B, tirx.BufferLoad(t, [zero]) * 2.0, [row, j]), None),
        ]
    )
    notes = {"tile.parallel": 1}
    inner = tirx.For(j, 0, 16, tirx.ForKind.SERIAL, body, None, notes)
    nest = tirx.For(i, 0, 32, tirx.ForKind.SERIAL, inner, None, notes)
    return kernel_module([A, B], n, bx, nest)


@pytest.mark.parametrize("n", [5, 70])
def test_buffers_allocated_in_a_split_nest_are_renamed_in_the_main_path(n):
    split = split_dynamic_tails(local_in_nest_kernel(), CTX)
    assert tvm.tirx.analysis.verify_well_formed(split["k"], False)  # one definition per buffer
    allocated = []
    tvm_ffi.structural_walk(split["k"].body, (tirx.AllocBuffer, lambda s: allocated.append(s.buffer)))
    assert len(allocated) == 2 and not allocated[0].same_as(allocated[1])
    assert_doubles(split, n)


def imperfect_nest_kernel():
    """B = 2 * A (n, m) for m <= 16: a row loop running a statement and a guarded inner column loop."""
    n, m = tirx.Var("n", "int32"), tirx.Var("m", "int32")
    A = tirx.decl_buffer((n, m), "float32", name="A")
    B = tirx.decl_buffer((n, m), "float32", name="B")
    bx, i, j = (tirx.Var(name, "int32") for name in ("bx", "i", "j"))
    row = bx * 32 + i
    first = tirx.IfThenElse(row < n, tirx.BufferStore(B, tirx.BufferLoad(A, [row, 0]) * 2.0, [row, 0]), None)
    rest = tirx.IfThenElse(
        tirx.And(row < n, j + 1 < m),
        tirx.BufferStore(B, tirx.BufferLoad(A, [row, j + 1]) * 2.0, [row, j + 1]),
        None,
    )
    notes = {"tile.parallel": 1}
    inner = tirx.For(j, 0, 15, tirx.ForKind.SERIAL, rest, None, notes)
    nest = tirx.For(i, 0, 32, tirx.ForKind.SERIAL, tirx.SeqStmt([first, inner]), None, notes)
    return kernel_module([A, B], n, bx, nest)


@pytest.mark.parametrize("n", [5, 70])
def test_guards_on_an_inner_loop_variable_split_the_inner_nest_only(n):
    split = split_dynamic_tails(imperfect_nest_kernel(), CTX)
    assert tvm.tirx.analysis.verify_well_formed(split["k"], False)  # no guard hoisted past its loop
    body = split["k"].body.body
    assert isinstance(body, tirx.For)  # the row loop is not split (a guard uses j) ...
    branches = []
    tvm_ffi.structural_walk(body, (tirx.IfThenElse, branches.append))
    assert any(isinstance(b.then_case, tirx.For) for b in branches)  # ... its column loop is
    assert_doubles(split, n)


def named_row_kernel(stores: int):
    """B = 2 * A (n, 16) where the row is a local scalar ``r`` stored ``stores`` times, then guarded on."""
    n = tirx.Var("n", "int32")
    A = tirx.decl_buffer((n, 16), "float32", name="A")
    B = tirx.decl_buffer((n, 16), "float32", name="B")
    r = tirx.decl_buffer((1,), "int32", name="r", scope="local")
    bx, i, j = (tirx.Var(name, "int32") for name in ("bx", "i", "j"))
    zero = tirx.const(0, "int32")
    row = tirx.BufferLoad(r, [zero])
    defs = [tirx.BufferStore(r, bx * 32 + i, [zero]) for _ in range(stores)]
    double = tirx.BufferStore(B, tirx.BufferLoad(A, [row, j]) * 2.0, [row, j])
    guarded = tirx.IfThenElse(row < n, double, None)
    notes = {"tile.parallel": 1}
    body = tirx.SeqStmt([tirx.AllocBuffer(r), *defs, guarded])
    nest = tirx.For(i, 0, 32, tirx.ForKind.SERIAL, tirx.For(j, 0, 16, tirx.ForKind.SERIAL, body, None, notes),
                    None, notes)
    return kernel_module([A, B], n, bx, nest)


@pytest.mark.parametrize("n", [5, 64])
def test_a_guard_on_a_value_named_in_the_nest_hoists_its_definition(n):
    # Regression (issue 17): `r = bx * 32 + i; if r < n:` hoisted `r < n` out of r's scope.
    split = split_dynamic_tails(named_row_kernel(stores=1), CTX)
    assert tvm.tirx.analysis.verify_well_formed(split["k"], False)
    branch = split["k"].body.body
    assert isinstance(branch, tirx.IfThenElse) and "bx * 32 + 31 < n" in str(branch.condition)
    assert_doubles(split, n)


def test_a_guard_on_a_value_stored_twice_in_the_nest_stays_put():
    mod = named_row_kernel(stores=2)  # not a single definition: the guard reads the nest's own state
    tvm.ir.assert_structural_equal(split_dynamic_tails(mod, CTX), mod)
