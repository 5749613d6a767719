"""Thread binding of T.Parallel nests: structure, and the visited elements per thread."""

import itertools

import numpy as np
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.annotations import LOOP_FRAGMENT, PARALLEL_LOOP
from tile.ir.backend import Capabilities
from tile.ir.target import Target
from tile.ir.transform import CompileContext, bind_parallel_loops
from tile.ir.transform.infer_layout import encode_layout
from tile.layout import make_linear_fragment
from tile.layout.hardware import make_mma_block_fragment

GPU = CompileContext(
    Target("cuda", "sm_80"),
    Capabilities(32, 1024, 48 * 1024, frozenset({"float32"}), 128, False, True, True, ((16, 8, 16),)),
)
CPU = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))


def nest_module(shape, threads, fragment=None):
    C = tirx.decl_buffer(shape, "float32", name="C", scope="local.fragment")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    store = tirx.BufferStore(C, tirx.BufferLoad(C, [i, j]) * 2.0, [i, j])
    notes = {PARALLEL_LOOP: 1}
    inner = tirx.For(j, 0, shape[1], tirx.ForKind.SERIAL, store, annotations=notes)
    outer_notes = dict(notes)
    if fragment is not None:
        outer_notes[LOOP_FRAGMENT] = encode_layout(fragment)
    outer = tirx.For(i, 0, shape[0], tirx.ForKind.SERIAL, inner, annotations=outer_notes)
    tx = tirx.Var("tx", "int32")
    body = tirx.AttrStmt(
        tirx.IterVar(ir.Range(0, threads), tx, 1, "threadIdx.x"), "thread_extent", threads, outer
    )
    func = tirx.PrimFunc([], tirx.SeqStmt([tirx.AllocBuffer(C), body])).with_attr("global_symbol", "k")
    return tvm.IRModule({"k": func}), tx


def visited(mod, tx, threads):
    """Interpret the bound nest: every (thread, element) pair its stores touch."""
    loops, stores, guards = [], [], []
    tvm_ffi.structural_walk(
        mod["k"].body,
        [(tirx.For, loops.append), (tirx.BufferStore, stores.append), (tirx.IfThenElse, guards.append)],
        order="pre",
    )
    (store,) = stores
    analyzer = tvm.sym.Analyzer()
    pairs = set()
    for t in range(threads):
        for local in itertools.product(*[range(int(lp.extent)) for lp in loops]):
            table = {tx: t, **{lp.loop_var: n for lp, n in zip(loops, local, strict=True)}}

            def value(e, table=table):
                def swap(v):
                    return next((tirx.const(x, "int32") for k, x in table.items() if v.same_as(k)), v)

                return int(analyzer.simplify(tvm_ffi.structural_map(e, (ir.Var, swap))))

            if guards and not value(guards[0].condition):
                continue
            pairs.add((tuple(value(e) for e in store.indices), t))
    return pairs


def test_gpu_rewrite_binds_threads_and_loops_over_locals():
    frag = make_mma_block_fragment(64, 64, 2, 2)
    mod, tx = nest_module((64, 64), 128, frag)
    out = bind_parallel_loops(mod, GPU)
    loops = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.For, loops.append), order="pre")
    assert [int(lp.extent) for lp in loops] == [frag.locals_per_thread()]
    assert all(PARALLEL_LOOP not in [str(k) for k in lp.annotations] for lp in loops)
    pairs = visited(out, tx, 128)
    expected = {(c, t) for c, _r, t, _l in frag.enumerate_threads()}
    assert pairs == expected and len(pairs) == 64 * 64


def test_gpu_default_binding_is_row_major():
    mod, tx = nest_module((8, 64), 128)
    out = bind_parallel_loops(mod, GPU)
    loops = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.For, loops.append), order="pre")
    (loop,) = loops
    assert int(loop.extent) == 4
    frag = make_linear_fragment([8, 64], 128)
    got = visited(out, tx, 128)
    assert got == {(c, t) for c, _r, t, _l in frag.enumerate_threads()}
    counts = np.zeros((8, 64), "int32")
    for (i, j), _t in got:
        counts[i, j] += 1
    assert np.all(counts == 1)


def test_gpu_fewer_elements_than_threads_are_guarded():
    mod, tx = nest_module((4, 8), 128)
    out = bind_parallel_loops(mod, GPU)
    got = visited(out, tx, 128)
    assert {t for _c, t in got} == set(range(32)) and len(got) == 32


def test_cpu_keeps_vectorize_parallel_loops_behaviour():
    mod, _ = nest_module((8, 16), 128, make_linear_fragment([8, 16], 128))
    out = bind_parallel_loops(mod, CPU)
    loops = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.For, loops.append), order="pre")
    assert [lp.kind for lp in loops] == [tirx.ForKind.SERIAL, tirx.ForKind.VECTORIZED]
    assert all(len(lp.annotations) == 0 for lp in loops)
