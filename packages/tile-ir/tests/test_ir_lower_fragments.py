"""lower_fragments: fragments become per-thread arrays indexed through their layout."""

import collections

import numpy as np
import tvm
import tvm_ffi
from _ir_thread_interp import run_block
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


def module(frag, threads, accumulate=False):
    """C (a fragment) doubled in a T.Parallel nest bound by ``frag``; then ``O = C`` (or ``O += C``)."""
    shape = [int(e) for e in frag.get_input_shape()]
    C = tirx.decl_buffer(shape, "float32", name="C", scope="local.fragment")
    out = tirx.decl_buffer(shape, "float32", name="O")
    idx = [tirx.Var(f"i{d}", "int32") for d in range(len(shape))]
    body = tirx.SeqStmt(
        [
            tirx.BufferStore(C, tirx.BufferLoad(C, idx) * 2.0, idx),
            tirx.BufferStore(
                out,
                tirx.BufferLoad(C, idx) + tirx.BufferLoad(out, idx)
                if accumulate
                else tirx.BufferLoad(C, idx),
                idx,
            ),
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


def registers_of(frag, name="C"):
    """Each thread's register file for ``frag`` holding ``value(coord)`` in every copy."""

    def init(t):
        regs = np.full(frag.locals_per_thread(), np.nan)
        for coord, _rep, thread, local in frag.enumerate_threads():
            if thread == t:
                regs[local[0]] = value_of(coord)
        return {name: regs}

    return init


def value_of(coord):
    return 1.0 + sum(c * 1000**d for d, c in enumerate(reversed(coord)))


def check_run(frag, threads, mod, tx, accumulate=False):
    """Lower ``mod``, run it on every thread and check registers and the global ``O``."""
    out = lower_fragments(bind_parallel_loops(mod, GPU), GPU)
    shape = [int(e) for e in frag.get_input_shape()]
    start = np.full(shape, 5.0) if accumulate else np.zeros(shape)
    run = run_block(out["k"], threads, {"O": start}, registers_of(frag))
    want = np.array([value_of(c) for c in np.ndindex(*shape)])
    np.testing.assert_array_equal(run.memory["O"], 2 * want + start.ravel())
    # every element of O is written once, however many threads hold a copy of it
    np.testing.assert_array_equal(run.writes["O"], np.ones(len(want), dtype=np.int64))
    for coord, _rep, thread, local in frag.enumerate_threads():
        # every copy of C (a register of each owner) is updated, not only one
        assert run.registers[thread]["C"][local[0]] == 2 * value_of(coord), (coord, thread)
    return out


def test_fragment_becomes_per_thread_array_indexed_by_layout():
    frag = make_mma_block_fragment(32, 32, 2, 1)
    mod, tx = module(frag, 64)
    out = check_run(frag, 64, mod, tx)
    allocs = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.AllocBuffer, allocs.append))
    (alloc,) = allocs
    assert str(alloc.buffer.scope()) == "local"
    assert [int(e) for e in alloc.buffer.shape] == [frag.locals_per_thread()]


def test_replicated_nest_updates_every_copy_and_stores_once():
    # the row fragment a reduction leaves: row i on the 32 threads holding x[i, :]
    rows = project_fragment(make_linear_fragment([8, 128], 64), [8, 128], [0])
    assert rows.replicate_size > 1
    mod, tx = module(rows, 64)
    check_run(rows, 64, mod, tx)


def test_replicated_read_modify_write_of_global_memory_happens_once():
    # an atomic-style O[i] += C[i] from a replicated fragment: 64 copies, one update
    rows = project_fragment(make_linear_fragment([8, 128], 64), [8, 128], [0])
    mod, tx = module(rows, 64, accumulate=True)
    out = check_run(rows, 64, mod, tx, accumulate=True)
    stores = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.BufferStore, stores.append))
    assert any(str(s.buffer.name) == "O" for s in stores)


def test_mma_accumulator_rows_bind_with_dense_registers():
    # FlashAttention's row vectors: the accumulator of a 64x64 gemm over 2x2 warps with
    # its columns dropped. Each thread holds 4 rows, each row 8 copies (4 lanes x 2 warps).
    acc = make_mma_block_fragment(64, 64, 2, 2)
    rows = project_fragment(acc, [64, 64], [0])
    assert rows.locals_per_thread() == 4 and rows.replicate_size == 8
    for i in range(64):
        assert rows.owners((i,)) == sorted({t for (r, _c), _p, t, _l in acc.enumerate_threads() if r == i})
    mod, tx = module(rows, 128)
    check_run(rows, 128, mod, tx)
    mod, tx = module(rows, 128, accumulate=True)
    check_run(rows, 128, mod, tx, accumulate=True)


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


def test_packed_operand_lives_on_the_threads_that_unpack_it():
    # B_dequant[i, j] = unpack(B[i, j // 2]) in a nest bound by an mma fragment: B's
    # element (i, b) must be held by the threads of iterations (i, 2b) and (i, 2b + 1)
    loop = make_mma_block_fragment(32, 32, 2, 1)
    packed = project_fragment(loop, [32, 32], [0, 1], [1, 2])
    assert [int(e) for e in packed.get_input_shape()] == [32, 16]
    for (i, j), _rep, thread, _local in loop.enumerate_threads():
        assert thread in packed.owners((i, j // 2))
    slots = {}
    for coord, _rep, thread, local in packed.enumerate_threads():
        assert slots.setdefault((thread, local), coord) == coord  # one element per register
    per_thread = collections.Counter(thread for thread, _local in slots)
    assert set(per_thread.values()) == {packed.locals_per_thread()}  # dense registers
