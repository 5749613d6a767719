"""``fuse_vector_nests``: a producer nest and the reduction reading it become one pass, only when exact.

The legality rule is checked on hand-built nests (same index: fused; shifted, or not
injective over the nest: left alone), and on the real softmax/RMSNorm kernels (fewer
passes per row) with numpy as the reference, odd sizes included.
"""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

import tile.lang as tilelang
from tile.backends.cpu import MANIFEST
from tile.backends.cpu._src.fuse_vector_nests import fuse_sequence, try_fuse
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


def row_nests(func, upto):
    """Two-level vector nests of ``func`` after the CPU pipeline through pass ``upto``."""
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in MANIFEST.pipeline(TARGET):
        mod = step(mod, CTX)
        if step.name == upto:
            break
    return [
        f
        for f in loops(mod["main"].body)
        if f.kind == SERIAL and isinstance(f.body, tirx.For) and f.body.kind == VEC
    ]


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
