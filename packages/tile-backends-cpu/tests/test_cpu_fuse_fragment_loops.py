"""``fuse_fragment_loops`` and ``stack_small_locals``: the IR before/after, and numpy on every kernel.

Legal cases must fuse (one pass over the data); cases with a dependence across
iterations (shifted or transposed reads, a reduction over another dim, a fragment
living across a serial loop) must not, and every kernel must still match numpy,
including odd sizes whose tail tiles go through the guarded path.
"""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu import MANIFEST
from tile.backends.cpu._src.fuse_fragment_loops import FUSE_FRAGMENT_LOOPS
from tile.ir.annotations import PARALLEL_LOOP
from tile.ir.target import Target
from tile.ir.transform import CompileContext
from tile.ops.elementwise import add_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel

TARGET = Target("cpu")
CTX = CompileContext(TARGET, MANIFEST.capabilities(TARGET))


def lowered(func):
    """``func`` through the CPU pipeline up to (not including) the fusion pass."""
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in MANIFEST.pipeline(TARGET):
        if step.name == "fuse_fragment_loops":
            return mod
        mod = step(mod, CTX)
    raise AssertionError("fuse_fragment_loops is not in the CPU pipeline")


def block_body(mod):
    """The statements of the block (inside the launch attributes)."""
    body = mod["main"].body
    while isinstance(body, tirx.AttrStmt):
        body = body.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def is_parallel(stmt):
    return isinstance(stmt, tirx.For) and PARALLEL_LOOP in [str(k) for k in (stmt.annotations or {})]


def allocations(stmt):
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.AllocBuffer, lambda s: found.append(s.buffer)))
    return {str(b.name): (tuple(int(d) for d in b.shape), str(b.scope())) for b in found}


def count(stmt, kind):
    found = []
    tvm_ffi.structural_walk(stmt, (kind, found.append))
    return len(found)


def test_elementwise_add_becomes_one_nest_with_scalar_fragments():
    before = lowered(add_kernel(64, 128, "float32", block_M=32, block_N=64))
    assert sum(is_parallel(s) for s in block_body(before)) == 4  # copy A, copy B, add, copy C
    after = FUSE_FRAGMENT_LOOPS(before, CTX)
    stmts = block_body(after)
    assert len(stmts) == 1 and is_parallel(stmts[0]) and is_parallel(stmts[0].body)
    # the 32x64 fragments are per-iteration scalars inside the innermost loop
    inner = stmts[0].body.body
    assert allocations(after) == {"A_frag": ((1,), "local"), "B_frag": ((1,), "local")}
    assert allocations(inner) == allocations(after)
    assert count(inner, tirx.For) == 0


def test_softmax_block_runs_row_by_row():
    before = lowered(softmax_kernel(32, 256, block_M=8))
    # copy, max, exp, sum, reciprocal of the sum, scale, copy
    assert sum(is_parallel(s) for s in block_body(before)) == 7
    after = FUSE_FRAGMENT_LOOPS(before, CTX)
    stmts = block_body(after)
    assert len(stmts) == 1 and is_parallel(stmts[0]) and int(stmts[0].extent) == 8
    # the 8x256 fragment is one row, the row statistics are scalars, all allocated per row
    assert allocations(stmts[0].body)["x"] == ((256,), "local")
    assert allocations(stmts[0].body)["row_max"] == ((1,), "local")
    # the rescale and the copy out are one loop over the row
    row = list(stmts[0].body.seq)
    assert is_parallel(row[-1]) and count(row[-1], tirx.BufferStore) == 2


def test_rms_norm_moves_the_weight_copy_ahead_and_fuses_the_rows():
    after = FUSE_FRAGMENT_LOOPS(lowered(rms_norm_kernel(32, 256, block_M=8)), CTX)
    loops = [s for s in block_body(after) if isinstance(s, tirx.For)]
    assert len(loops) == 2
    assert "W[" in str(loops[0]) and int(loops[0].extent) == 256  # the weight copy, moved first
    assert int(loops[1].extent) == 8 and allocations(loops[1])["inv_rms"] == ((1,), "local")


def test_statements_with_opaque_memory_effects_are_not_fused():
    @T.prim_func
    def main(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((16, 64), "float32")
            T.copy(A[0, 0], f)
            for i, j in T.Parallel(16, 64):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, B[0, 0])

    before = lowered(main)
    stmts = block_body(before)
    first = next(s for s in stmts if is_parallel(s))
    # an extern call in the first nest makes it opaque: nothing may move across it
    call = tirx.Evaluate(tirx.call_extern("int32", "side_effect"))
    poisoned = tirx.For(first.loop_var, first.min, first.extent, first.kind,
                        tirx.SeqStmt([call, first.body]), None, first.annotations)
    body = tirx.SeqStmt([poisoned if s.same_as(first) else s for s in stmts])
    func = before["main"]
    attrs = func.body
    mod = tvm.IRModule({"main": func.with_body(_rewrap(attrs, body))})
    after = FUSE_FRAGMENT_LOOPS(mod, CTX)
    loops = [s for s in block_body(after) if is_parallel(s)]
    # the poisoned copy stays alone; the add and the copy out still fuse
    assert len(loops) == 2 and tvm_ffi.structural_equal(loops[0], poisoned)
    assert allocations(after)["f"] == ((16, 64), "local.fragment")


def _rewrap(node, inner):
    if isinstance(node, tirx.AttrStmt):
        return tirx.AttrStmt(node.node, node.attr_key, node.value, _rewrap(node.body, inner))
    return inner


def reversed_kernel(M, N):
    """B[i, j] = A[i, N-1-j] - A[i, j] through a fragment: element j reads element N-1-j."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 8), threads=128) as bx:
            f = T.alloc_fragment((8, N), "float32")
            g = T.alloc_fragment((8, N), "float32")
            T.copy(A[bx * 8, 0], f)
            for i, j in T.Parallel(8, N):
                g[i, j] = f[i, N - 1 - j] - f[i, j]
            T.copy(g, B[bx * 8, 0])

    return main


def transposed_kernel(N):
    """B = A.T + 1 through two fragments of one block."""

    @T.prim_func
    def main(A: T.Tensor((N, N), "float32"), B: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((N, N), "float32")
            g = T.alloc_fragment((N, N), "float32")
            T.copy(A[0, 0], f)
            for i, j in T.Parallel(N, N):
                g[i, j] = f[j, i] + 1.0
            T.copy(g, B[0, 0])

    return main


def column_sum_kernel(M, N):
    """B[i, j] = A[i, j] / sum_i A[i, j]: a reduction over dim 0 between two elementwise nests."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((N,), "float32")
            T.copy(A[0, 0], f)
            T.reduce_sum(f, s, dim=0)
            for i, j in T.Parallel(M, N):
                f[i, j] = f[i, j] / s[j]
            T.copy(f, B[0, 0])

    return main


def accumulate_kernel(K, M, N):
    """B = sum_k A[k]: the fragment lives across a serial loop, so it must not shrink."""

    @T.prim_func
    def main(A: T.Tensor((K, M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.serial(K):
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] + A[k, i, j]
            T.copy(acc, B[0, 0])

    return main


def test_reversed_reads_fuse_rows_but_not_elements():
    after = FUSE_FRAGMENT_LOOPS(lowered(reversed_kernel(16, 64)), CTX)
    stmts = [s for s in block_body(after) if isinstance(s, tirx.For)]
    assert len(stmts) == 1  # rows are independent ...
    inner = [s for s in stmts[0].body.seq if isinstance(s, tirx.For)]
    assert len(inner) == 2  # ... but f[N-1-j] is written by another iteration of the copy
    assert allocations(stmts[0])["f"] == ((64,), "local")
    assert allocations(inner[1])["g"] == ((1,), "local")  # computed and stored in one nest
    a = np.random.default_rng(1).standard_normal((21, 64)).astype(np.float32)
    kernel = tilelang.compile(reversed_kernel(21, 64), out_idx=[-1], target="cpu")
    np.testing.assert_array_equal(kernel(a), a[:, ::-1] - a)


def test_transposed_reads_are_not_fused():
    after = FUSE_FRAGMENT_LOOPS(lowered(transposed_kernel(32)), CTX)
    assert sum(is_parallel(s) for s in block_body(after)) == 2  # copy in | transpose + copy out
    assert allocations(after)["f"] == ((32, 32), "local.fragment")
    a = np.random.default_rng(2).standard_normal((32, 32)).astype(np.float32)
    kernel = tilelang.compile(transposed_kernel(32), out_idx=[-1], target="cpu")
    np.testing.assert_array_equal(kernel(a), a.T + 1.0)


def test_reduction_over_another_dim_is_not_fused_with_rows():
    # square, so the reduction's loop over columns has the extent of the loops over rows
    after = FUSE_FRAGMENT_LOOPS(lowered(column_sum_kernel(32, 32)), CTX)
    assert allocations(after)["f"] == ((32, 32), "local.fragment")
    a = np.random.default_rng(3).random((32, 32)).astype(np.float32) + 0.5
    kernel = tilelang.compile(column_sum_kernel(32, 32), out_idx=[-1], target="cpu")
    np.testing.assert_allclose(kernel(a), a / a.sum(0), rtol=1e-6)


def test_fragment_carried_across_a_serial_loop_keeps_its_storage():
    after = FUSE_FRAGMENT_LOOPS(lowered(accumulate_kernel(3, 8, 64)), CTX)
    assert allocations(after)["acc"] == ((8, 64), "local.fragment")
    a = np.random.default_rng(4).standard_normal((3, 8, 64)).astype(np.float32)
    kernel = tilelang.compile(accumulate_kernel(3, 8, 64), out_idx=[-1], target="cpu")
    np.testing.assert_allclose(kernel(a), a.sum(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("M", "N"), [(64, 128), (50, 100), (33, 4099), (7, 3)])
def test_fused_tile_ops_kernels_match_numpy(M, N):
    rng = np.random.default_rng(M * N)
    a = rng.standard_normal((M, N), dtype=np.float32)
    b = rng.standard_normal((M, N), dtype=np.float32)
    w = rng.standard_normal(N, dtype=np.float32)
    add = tilelang.compile(add_kernel(M, N, "float32"), out_idx=[-1], target="cpu")
    np.testing.assert_array_equal(add(a, b), a + b)
    softmax = tilelang.compile(softmax_kernel(M, N), out_idx=[-1], target="cpu")
    e = np.exp(a.astype(np.float64) - a.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax(a), e / e.sum(-1, keepdims=True), rtol=2e-5, atol=1e-7)
    rms = tilelang.compile(rms_norm_kernel(M, N), out_idx=[-1], target="cpu")
    want = a / np.sqrt((a.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(rms(a, w), want, rtol=2e-5, atol=1e-5)


def test_small_locals_are_stack_allocated_and_large_ones_are_not():
    workspace = "load ptr, ptr @__TVMBackendAllocWorkspace"
    llvm = tilelang.compile(add_kernel(64, 128, "float32"), target="cpu").get_kernel_source("llvm")
    assert workspace not in llvm  # per-lane scalars: allocas, then registers
    # a 4096-float row is above TVM's stack limit: it stays a workspace allocation
    llvm = tilelang.compile(softmax_kernel(16, 4096), out_idx=[-1], target="cpu").get_kernel_source("llvm")
    assert llvm.count(workspace) == 1


def folded(func):
    from tile.backends.cpu._src.fold_block_columns import FOLD_BLOCK_COLUMNS

    return FOLD_BLOCK_COLUMNS(FUSE_FRAGMENT_LOOPS(lowered(func), CTX), CTX)


def grid_x(mod):
    body = mod["main"].body
    while isinstance(body, tirx.AttrStmt):
        if str(body.attr_key) == "thread_extent" and str(body.node.thread_tag) == "blockIdx.x":
            return int(body.value)
        body = body.body
    raise AssertionError("no blockIdx.x")


@pytest.mark.parametrize(("M", "N"), [(64, 256), (50, 256)])  # row tails keep the fold
def test_narrow_column_blocks_fold_into_whole_rows(M, N):
    mod = folded(add_kernel(M, N, "float32", block_M=32, block_N=64))
    assert grid_x(mod) == 1
    (nest,) = block_body(mod)
    loops = [nest, nest.body, nest.body.body]
    assert [int(lp.extent) for lp in loops] == [32, N // 64, 64]  # rows, folded blocks, columns
    rng = np.random.default_rng(M)
    a, b = rng.standard_normal((M, N), dtype=np.float32), rng.standard_normal((M, N), dtype=np.float32)
    kernel = tilelang.compile(add_kernel(M, N, "float32", block_M=32, block_N=64), out_idx=[-1], target="cpu")
    np.testing.assert_array_equal(kernel(a, b), a + b)


def test_blocks_are_not_folded_when_they_pick_rows_or_guard_columns():
    assert grid_x(folded(add_kernel(64, 100, "float32", block_M=32, block_N=64))) == 2  # column tail
    assert grid_x(folded(add_kernel(64, 4096, "float32", block_M=2, block_N=1024))) == 4  # long runs
    assert grid_x(folded(softmax_kernel(64, 256, block_M=8))) == 8  # blockIdx.x picks rows
