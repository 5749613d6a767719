"""lower_fragments: fragments become per-thread arrays indexed through their layout."""

import itertools

import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.annotations import LAYOUT_MAP, LOOP_FRAGMENT, PARALLEL_LOOP
from tile.ir.backend import Capabilities
from tile.ir.ops.layout_rules import project_fragment
from tile.ir.target import Target
from tile.ir.transform import CompileContext, bind_parallel_loops
from tile.ir.transform.infer_layout import encode_layout
from tile.ir.transform.lower_fragments import fragment_coords, lower_fragments
from tile.layout import make_linear_fragment
from tile.layout.hardware import make_mma_block_fragment

GPU = CompileContext(
    Target("cuda", "sm_80"),
    Capabilities(32, 1024, 48 * 1024, frozenset({"float32"}), 128, False, True, True, ((16, 8, 16),)),
)
CPU = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))


def module(frag, threads, out_shape=None):
    """C (a fragment) doubled in a T.Parallel nest bound by ``frag``; also stored to global O."""
    shape = [int(e) for e in frag.get_input_shape()]
    C = tirx.decl_buffer(shape, "float32", name="C", scope="local.fragment")
    out = tirx.decl_buffer(shape, "float32", name="O")
    idx = [tirx.Var(f"i{d}", "int32") for d in range(len(shape))]
    body = tirx.SeqStmt(
        [
            tirx.BufferStore(C, tirx.BufferLoad(C, idx) * 2.0, idx),
            tirx.BufferStore(out, tirx.BufferLoad(C, idx), idx),
        ]
    )
    for d in reversed(range(len(shape))):
        notes = {PARALLEL_LOOP: 1}
        if d == 0:
            notes[LOOP_FRAGMENT] = encode_layout(frag)
        body = tirx.For(idx[d], 0, shape[d], tirx.ForKind.SERIAL, body, annotations=notes)
    tx = tirx.Var("tx", "int32")
    body = tirx.AttrStmt(
        tirx.IterVar(ir.Range(0, threads), tx, 1, "threadIdx.x"), "thread_extent", threads, body
    )
    func = tirx.PrimFunc([out], tirx.SeqStmt([tirx.AllocBuffer(C), body])).with_attrs(
        {"global_symbol": "k", LAYOUT_MAP: {"C": encode_layout(frag)}}
    )
    return tvm.IRModule({"k": func}), tx


def run_lowered(mod, tx, threads):
    """Interpret the lowered kernel's stores: {(thread, global coord) -> local index read}."""
    loops, stores, guards = [], [], []
    tvm_ffi.structural_walk(
        mod["k"].body,
        [(tirx.For, loops.append), (tirx.BufferStore, stores.append), (tirx.IfThenElse, guards.append)],
        order="pre",
    )
    out_store = next(s for s in stores if str(s.buffer.name) == "O")
    analyzer = tvm.sym.Analyzer()
    seen = {}
    for t in range(threads):
        for point in itertools.product(*[range(int(lp.extent)) for lp in loops]):
            table = {tx: t, **{lp.loop_var: n for lp, n in zip(loops, point, strict=True)}}

            def value(e, table=table):
                def swap(v):
                    return next((tirx.const(x, "int32") for k, x in table.items() if v.same_as(k)), v)

                return int(analyzer.simplify(tvm_ffi.structural_map(e, (ir.Var, swap))))

            if guards and not value(guards[0].condition):
                continue
            coord = tuple(value(e) for e in out_store.indices)
            (local,) = out_store.value.indices
            seen[(t, coord)] = value(local)
    return seen


def test_fragment_becomes_per_thread_array_indexed_by_layout():
    frag = make_mma_block_fragment(32, 32, 2, 1)
    mod, tx = module(frag, 64)
    out = lower_fragments(bind_parallel_loops(mod, GPU), GPU)
    allocs = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.AllocBuffer, allocs.append))
    (alloc,) = allocs
    assert str(alloc.buffer.scope()) == "local"
    assert [int(e) for e in alloc.buffer.shape] == [frag.locals_per_thread()]
    seen = run_lowered(out, tx, 64)
    expected = {(t, coord): local[0] for coord, _r, t, local in frag.enumerate_threads()}
    assert seen == expected and len(seen) == 32 * 32


def test_replicated_nest_runs_on_every_copy():
    # the row fragment a reduction leaves: row i on the 32 threads holding x[i, :]
    rows = project_fragment(make_linear_fragment([8, 128], 64), [8, 128], [0])
    assert rows.replicate_size > 1
    mod, tx = module(rows, 64)
    out = lower_fragments(bind_parallel_loops(mod, GPU), GPU)
    seen = run_lowered(out, tx, 64)
    expected = {(t, coord): local[0] for coord, _r, t, local in rows.enumerate_threads()}
    assert seen == expected


def test_fragment_coords_inverts_the_layout():
    frag = make_mma_block_fragment(32, 16, 2, 1)
    tx, local = tirx.Var("tx", "int32"), tirx.Var("l", "int32")
    coords, valid = fragment_coords(frag, tx, local)
    analyzer = tvm.sym.Analyzer()
    for coord, _r, t, loc in frag.enumerate_threads():
        table = {tx: tirx.const(t, "int32"), local: tirx.const(loc[0], "int32")}

        def value(e, table=table):
            return int(
                analyzer.simplify(
                    tvm_ffi.structural_map(
                        e, (ir.Var, lambda v: next((x for k, x in table.items() if v.same_as(k)), v))
                    )
                )
            )

        assert tuple(value(c) for c in coords) == coord and value(valid)


def test_cpu_module_is_unchanged():
    frag = make_mma_block_fragment(32, 32, 2, 1)
    mod, _ = module(frag, 64)
    assert lower_fragments(mod, CPU).same_as(mod)
