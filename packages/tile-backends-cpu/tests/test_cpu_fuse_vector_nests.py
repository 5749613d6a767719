"""``fuse_vector_nests``: a producer nest and the reduction reading it become one pass, only when exact.

The legality rule is checked on hand-built nests (same index: fused; shifted, or not
injective over the nest: left alone), and on the real softmax/RMSNorm kernels (fewer
passes per row) with numpy as the reference, odd sizes included.
"""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

import tile.lang as tilelang
from tile.backends.cpu import MANIFEST
from tile.backends.cpu._src.fuse_vector_nests import forward_sequence, fuse_sequence, try_fuse
from tile.ir.target import Target
from tile.ir.transform import CompileContext
from tile.ops.norm import rms_norm_kernel, softmax_kernel

TARGET = Target("cpu")
CTX = CompileContext(TARGET, MANIFEST.capabilities(TARGET))
SERIAL, VEC = tirx.ForKind.SERIAL, tirx.ForKind.VECTORIZED


def nest(body_of, outer=4, inner=16):
    """``for o in range(outer): for v in vectorized(inner): body_of(o, v)``."""
    o, v = tirx.Var("o", "int32"), tirx.Var("v", "int32")
    return tirx.For(o, 0, outer, SERIAL, tirx.For(v, 0, inner, VEC, body_of(o, v)))


def buffers():
    src = tirx.decl_buffer((64,), "float32", name="src")
    x = tirx.decl_buffer((64,), "float32", name="x", scope="local")
    acc = tirx.decl_buffer((16,), "float32", name="acc", scope="local")
    return src, x, acc


def producer(src, x):
    return nest(lambda o, v: tirx.BufferStore(x, tirx.BufferLoad(src, [o * 16 + v]), [o * 16 + v]))


def consumer(x, acc, index):
    return nest(
        lambda o, v: tirx.BufferStore(acc, tirx.BufferLoad(acc, [v]) + tirx.BufferLoad(x, [index(o, v)]), [v])
    )


def loops(stmt):
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.For, found.append))
    return found


def test_same_index_fuses_into_one_nest():
    src, x, acc = buffers()
    fused = try_fuse(producer(src, x), consumer(x, acc, lambda o, v: o * 16 + v))
    assert fused is not None
    assert len(loops(fused)) == 2  # one nest: the outer serial loop and one vectorized loop
    inner = fused.body.body
    assert isinstance(inner, tirx.SeqStmt) and len(inner.seq) == 2
    assert [str(s.buffer.name) for s in inner.seq] == ["x", "acc"]  # producer first, in order


@pytest.mark.parametrize(
    "index",
    [
        lambda o, v: o * 16 + v + 1,  # reads what the next iteration writes
        lambda o, v: v,  # every outer iteration reads row 0's slots: not injective over (o, v)
        lambda o, v: (o * 16 + v) // 2,  # two iterations read one slot
    ],
    ids=["shifted", "not-injective", "halved"],
)
def test_other_indices_are_not_fused(index):
    src, x, acc = buffers()
    assert try_fuse(producer(src, x), consumer(x, acc, index)) is None


def test_different_shapes_are_not_fused():
    src, x, acc = buffers()
    o, v = tirx.Var("o", "int32"), tirx.Var("v", "int32")
    short = tirx.For(
        o, 0, 2, SERIAL, tirx.For(v, 0, 16, VEC, tirx.BufferStore(acc, tirx.BufferLoad(x, [o * 16 + v]), [v]))
    )
    assert try_fuse(producer(src, x), short) is None


def test_initialization_between_the_nests_moves_ahead():
    src, x, acc = buffers()
    v = tirx.Var("v", "int32")
    init = tirx.For(v, 0, 16, VEC, tirx.BufferStore(acc, tirx.const(0.0, "float32"), [v]))
    out = fuse_sequence([producer(src, x), init, consumer(x, acc, lambda o, v: o * 16 + v)])
    assert len(out) == 2
    assert tvm_ffi.structural_equal(out[0], init)
    assert len(loops(out[1])) == 2


def test_initialization_that_the_producer_reads_stays_put():
    src, x, acc = buffers()
    v = tirx.Var("v", "int32")
    init = tirx.For(v, 0, 16, VEC, tirx.BufferStore(src, tirx.const(0.0, "float32"), [v]))
    out = fuse_sequence([producer(src, x), init, consumer(x, acc, lambda o, v: o * 16 + v)])
    assert len(out) == 3  # the producer reads src, which init writes: nothing may move or fuse


def lanes_nest(body_of, outer=4, inner=16):
    """``nest`` whose outer body allocates a per-lane local first, as ``vectorize_parallel_loops`` does."""
    lanes = tirx.decl_buffer((inner,), "float32", name="t_lanes", scope="local")
    o, v = tirx.Var("o", "int32"), tirx.Var("v", "int32")
    vec = tirx.For(v, 0, inner, VEC, body_of(o, v, lanes))
    return tirx.For(o, 0, outer, SERIAL, tirx.SeqStmt([tirx.AllocBuffer(lanes), vec])), lanes


def test_nests_whose_outer_body_allocates_lanes_first_fuse_and_keep_the_allocation():
    src, x, acc = buffers()

    def body(o, v, t):
        return tirx.SeqStmt([
            tirx.BufferStore(t, tirx.BufferLoad(src, [o * 16 + v]) * 2.0, [v]),
            tirx.BufferStore(x, tirx.BufferLoad(t, [v]), [o * 16 + v]),
        ])

    first, lanes = lanes_nest(body)
    fused = try_fuse(first, consumer(x, acc, lambda o, v: o * 16 + v))
    assert fused is not None
    outer = list(fused.body.seq)
    assert isinstance(outer[0], tirx.AllocBuffer) and outer[0].buffer.same_as(lanes)
    assert [str(s.buffer.name) for s in outer[1].body.seq] == ["t_lanes", "x", "acc"]


def _stores(stmt):
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, found.append))
    return [str(s.buffer.name) for s in found]


def test_a_local_stored_and_read_back_in_one_iteration_becomes_one_slot_per_lane():
    src, x, acc = buffers()
    fused = try_fuse(producer(src, x), consumer(x, acc, lambda o, v: o * 16 + v))
    out = forward_sequence([tirx.AllocBuffer(x), fused])
    assert len(out) == 1  # x's row is gone: the nest allocates 16 lanes per outer iteration
    outer = list(out[0].body.seq)
    assert isinstance(outer[0], tirx.AllocBuffer) and [int(d) for d in outer[0].buffer.shape] == [16]
    assert _stores(out[0]) == ["x_lanes", "acc"]
    # the lanes are read where x was, at the lane index
    loads = []
    tvm_ffi.structural_walk(out[0], (ir.TensorLoad, loads.append))
    assert any(str(ld.source.name) == "x_lanes" and ld.indices[0].same_as(outer[1].loop_var) for ld in loads)


@pytest.mark.parametrize("case", ["read-after", "read-first", "other-index", "not-allocated-here"])
def test_locals_that_are_not_private_to_an_iteration_stay_in_memory(case):
    src, x, acc = buffers()
    fused = try_fuse(producer(src, x), consumer(x, acc, lambda o, v: o * 16 + v))
    stmts = [tirx.AllocBuffer(x), fused]
    if case == "read-after":  # another statement reads x after the nest
        stmts.append(tirx.BufferStore(acc, tirx.BufferLoad(x, [3]), [0]))
    elif case == "read-first":  # the nest reads x before it stores it
        stmts = [tirx.AllocBuffer(x), try_fuse(consumer(x, acc, lambda o, v: o * 16 + v), producer(src, x))]
    elif case == "other-index":  # the nest reads a neighbour's slot
        stmts = [tirx.AllocBuffer(x), nest(lambda o, v: tirx.SeqStmt([
            tirx.BufferStore(x, tirx.BufferLoad(src, [o * 16 + v]), [o * 16 + v]),
            tirx.BufferStore(acc, tirx.BufferLoad(x, [o * 16 + (v + 1) % 16]), [v]),
        ]))]
    else:
        stmts = [fused]
    assert all(s is not None for s in stmts)
    out = forward_sequence(stmts)
    assert "x" in [name for stmt in out for name in _stores(stmt)]


def row_nests(func, upto):
    """Two-level vector nests of ``func`` after the CPU pipeline through pass ``upto``."""
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in MANIFEST.pipeline(TARGET):
        mod = step(mod, CTX)
        if step.name == upto:
            break
    return [f for f in loops(mod["main"].body) if f.kind == SERIAL and isinstance(_inner(f), tirx.For)]


def _inner(outer):
    """The vectorized loop of a two-level nest, after the per-lane allocations that may open it."""
    items = list(outer.body.seq) if isinstance(outer.body, tirx.SeqStmt) else [outer.body]
    if all(isinstance(s, tirx.AllocBuffer) for s in items[:-1]) and isinstance(items[-1], tirx.For):
        return items[-1] if items[-1].kind == VEC else None
    return None


@pytest.mark.parametrize(
    ("kernel", "before", "after"),
    [(softmax_kernel(32, 4096), 5, 3), (rms_norm_kernel(32, 4096), 4, 3)],
    ids=["softmax", "rms_norm"],
)
def test_row_kernels_take_fewer_passes(kernel, before, after):
    # softmax: load, max, exp, sum, scale+store -> load+max, exp+sum, scale+store
    # rms_norm: weight, load+square, sum, scale+store -> weight, load+square+sum, scale+store
    assert len(row_nests(kernel, "bind_parallel_loops")) == before
    assert len(row_nests(kernel, "fuse_vector_nests")) == after


@pytest.mark.parametrize(("m", "n"), [(64, 4096), (37, 333), (5, 130)])
def test_softmax_and_rms_norm_match_numpy(m, n):
    rng = np.random.default_rng(m * n)
    x = (rng.standard_normal((m, n)) * 4).astype("float32")
    w = rng.standard_normal(n).astype("float32")
    y = tilelang.compile(softmax_kernel(m, n), out_idx=[-1], target="cpu")(x)
    e = np.exp(x.astype("float64") - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-7)
    y = tilelang.compile(rms_norm_kernel(m, n), out_idx=[-1], target="cpu")(x, w)
    x64 = x.astype("float64")
    ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, ref, rtol=2e-5, atol=2e-6)


def test_a_local_read_through_a_view_stays_in_memory():
    # the copy nest is F's only direct user; the reshape reads F through a view declared over it
    import tile.lang.language as T

    @T.prim_func
    def main(A: T.Tensor((1024,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((1024,), "float32")
            R = T.alloc_fragment((32,), "float32")
            T.copy(A, F)
            V = T.reshape(F, [32, 32])
            T.reduce_sum(V, R, dim=1)
            T.copy(R, B)

    a = np.random.default_rng(5).standard_normal(1024).astype("float32")
    got = tilelang.compile(main, out_idx=[-1], target="cpu")(a)
    np.testing.assert_allclose(got, a.reshape(32, 32).astype("float64").sum(axis=1), rtol=1e-5, atol=1e-5)
