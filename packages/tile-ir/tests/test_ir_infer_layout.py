"""Layout inference on hand-built tile IR for a GPU-like target (no device needed) and the CPU."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.annotations import ANNOTATED_LAYOUTS, LOOP_FRAGMENT, PARALLEL_LOOP
from tile.ir.backend import Capabilities
from tile.ir.errors import LayoutInferenceError
from tile.ir.ops import Copy, Fill, Gemm, Reduce
from tile.ir.target import Target
from tile.ir.transform import CompileContext, infer_layout, layout_map_of
from tile.ir.transform.infer_layout import decode_layout, encode_layout
from tile.layout import Fragment, make_linear_fragment, make_swizzled_layout
from tile.layout.hardware import make_mma_block_fragment

GPU = CompileContext(
    Target("cuda", "sm_80"),
    Capabilities(
        32, 1024, 48 * 1024, frozenset({"float16", "float32"}), 128, False, True, True, ((16, 8, 16),)
    ),
)
CPU = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))
HERE = tvm.ir.SourceName(__file__)


def span(line):
    return tvm.ir.Span(HERE, line, line, 1, 10)


def op(x, line=None):
    return tirx.Evaluate(x.encode(), span=span(line) if line else None)


def parallel(extents, body_fn, names="ij"):
    loop_vars = [tirx.Var(names[d], "int32") for d in range(len(extents))]
    stmt = body_fn(*loop_vars)
    for var, extent in reversed(list(zip(loop_vars, extents, strict=True))):
        stmt = tirx.For(var, 0, extent, tirx.ForKind.SERIAL, stmt, annotations={PARALLEL_LOOP: 1})
    return stmt


def kernel(params, allocs, stmts, threads=128, attrs=None):
    body = tirx.SeqStmt([tirx.AllocBuffer(b) for b in allocs] + stmts)
    tx = tirx.IterVar(ir.Range(0, threads), tirx.Var("tx", "int32"), 1, "threadIdx.x")
    body = tirx.AttrStmt(tx, "thread_extent", threads, body)
    bx = tirx.IterVar(ir.Range(0, 1), tirx.Var("bx", "int32"), 1, "blockIdx.x")
    body = tirx.AttrStmt(bx, "thread_extent", 1, body)
    func = tirx.PrimFunc(params, body).with_attr("global_symbol", "k")
    for key, value in (attrs or {}).items():
        func = func.with_attr(key, value)
    return tvm.IRModule({"k": func})


def gemm_bias_module():
    """C_local = A_s @ B_s; C_local[i, j] += bias_local[j] (paper Figure 7)."""
    A = tirx.decl_buffer((64, 32), "float16", name="A")
    Bias = tirx.decl_buffer((64,), "float32", name="Bias")
    A_s = tirx.decl_buffer((64, 32), "float16", name="A_s", scope="shared.dyn")
    B_s = tirx.decl_buffer((32, 64), "float16", name="B_s", scope="shared.dyn")
    C_l = tirx.decl_buffer((64, 64), "float32", name="C_local", scope="local.fragment")
    b_l = tirx.decl_buffer((64,), "float32", name="bias_local", scope="local.fragment")
    stmts = [
        op(Copy.build(A, A_s)),
        op(Gemm.build(A_s, B_s, C_l, False, False, True), 20),
        op(Copy.build(Bias, b_l)),
        parallel(
            [64, 64],
            lambda i, j: tirx.BufferStore(
                C_l, tirx.BufferLoad(C_l, [i, j]) + tirx.BufferLoad(b_l, [j]), [i, j], span=span(30)
            ),
        ),
    ]
    return kernel([A, Bias], [A_s, B_s, C_l, b_l], stmts)


def owners_table(frag):
    return {(c, t) for c, _r, t, _l in frag.enumerate_threads()}


def test_gemm_accumulator_takes_the_mma_block_fragment():
    layouts = layout_map_of(infer_layout(gemm_bias_module(), GPU)["k"])
    # 4 warps over a 64x64 tile: the square policy gives 2x2 warps.
    assert layouts["C_local"].is_equal(make_mma_block_fragment(64, 64, 2, 2))
    assert layouts["A_s"].is_equal(make_swizzled_layout([64, 32], "float16"))
    assert layouts["B_s"].is_equal(make_swizzled_layout([32, 64], "float16"))


def test_bias_gets_the_replicated_fragment_of_figure_7():
    layouts = layout_map_of(infer_layout(gemm_bias_module(), GPU)["k"])
    bias, acc = layouts["bias_local"], layouts["C_local"]
    assert isinstance(bias, Fragment) and bias.replicate_size == 16  # 2 warp rows x 8 lane rows
    # Every thread that computes C[i, j] holds bias[j], and only those threads do.
    for j in range(64):
        column_owners = sorted({acc.owners((i, j))[0] for i in range(64)})
        assert bias.owners((j,)) == column_owners
    # Within one thread, different bias elements use different registers.
    seen = {}
    for (j,), _rep, thread, local in bias.enumerate_threads():
        assert seen.setdefault((thread, local), j) == j


def test_parallel_loop_records_its_fragment():
    out = infer_layout(gemm_bias_module(), GPU)["k"]
    loops = []
    tvm_ffi.structural_walk(out.body, (tirx.For, loops.append), order="pre")
    notes = loops[0].annotations
    assert LOOP_FRAGMENT in [str(k) for k in notes]
    loop_frag = decode_layout(notes[LOOP_FRAGMENT])
    assert owners_table(loop_frag) == owners_table(make_mma_block_fragment(64, 64, 2, 2))


def softmax_module():
    """Row max of a gemm accumulator, then S[i, j] = exp(S[i, j] - m[i])."""
    A_s = tirx.decl_buffer((64, 32), "float16", name="A_s", scope="shared.dyn")
    B_s = tirx.decl_buffer((32, 64), "float16", name="B_s", scope="shared.dyn")
    S = tirx.decl_buffer((64, 64), "float32", name="S", scope="local.fragment")
    m = tirx.decl_buffer((64,), "float32", name="m", scope="local.fragment")
    stmts = [
        op(Gemm.build(A_s, B_s, S, False, False, True)),
        op(Reduce.build("max", S, m, 1, True)),
        parallel(
            [64, 64],
            lambda i, j: tirx.BufferStore(
                S, tirx.exp(tirx.BufferLoad(S, [i, j]) - tirx.BufferLoad(m, [i])), [i, j]
            ),
        ),
    ]
    return kernel([], [A_s, B_s, S, m], stmts)


def test_row_reduction_destination_is_consistent_with_the_loop():
    layouts = layout_map_of(infer_layout(softmax_module(), GPU)["k"])
    acc, row = layouts["S"], layouts["m"]
    for i in range(64):
        assert row.owners((i,)) == sorted({acc.owners((i, j))[0] for j in range(64)})
    assert row.replicate_size == 8  # 4 lanes share a row of an m16n8 tile, times 2 warp columns


def conflict_module():
    """C2 is a gemm accumulator, but a loop reads it transposed next to C1."""
    A_s = tirx.decl_buffer((64, 32), "float16", name="A_s", scope="shared.dyn")
    B_s = tirx.decl_buffer((32, 64), "float16", name="B_s", scope="shared.dyn")
    C1 = tirx.decl_buffer((64, 64), "float32", name="C1", scope="local.fragment")
    C2 = tirx.decl_buffer((64, 64), "float32", name="C2", scope="local.fragment")
    stmts = [
        op(Gemm.build(A_s, B_s, C1, False, False, True), 41),
        op(Gemm.build(A_s, B_s, C2, False, False, True), 42),
        parallel(
            [64, 64],
            lambda i, j: tirx.BufferStore(
                C1, tirx.BufferLoad(C1, [i, j]) + tirx.BufferLoad(C2, [j, i]), [i, j], span=span(44)
            ),
        ),
    ]
    return kernel([], [A_s, B_s, C1, C2], stmts)


def test_conflict_names_buffer_both_operators_and_lines():
    with pytest.raises(LayoutInferenceError) as info:
        infer_layout(conflict_module(), GPU)
    err = info.value
    assert "buffer C2" in err.message
    assert "T.gemm" in err.message and "T.Parallel loop over (i, j)" in err.message
    assert f"{__file__}:42" in err.message and f"{__file__}:44" in err.message
    assert err.location is not None and err.location.line == 44
    assert "T.copy" in (err.hint or "")


def test_fragment_copy_propagates_and_annotation_wins():
    X = tirx.decl_buffer((32, 32), "float32", name="X")
    F = tirx.decl_buffer((32, 32), "float32", name="F", scope="local.fragment")
    G = tirx.decl_buffer((32, 32), "float32", name="G", scope="local.fragment")
    user = Fragment([32, 32], forward_fn=lambda i, j: (j * 4 + i // 8, i % 8))
    stmts = [op(Copy.build(X, F)), op(Copy.build(F, G)), op(Fill.build(G, 0.0))]
    mod = kernel([X], [F, G], stmts, attrs={ANNOTATED_LAYOUTS: {"F": encode_layout(user)}})
    layouts = layout_map_of(infer_layout(mod, GPU)["k"])
    assert layouts["F"].is_equal(user) and layouts["G"].is_equal(user)


def test_unconstrained_fragment_gets_the_row_major_binding():
    X = tirx.decl_buffer((16, 32), "float32", name="X")
    F = tirx.decl_buffer((16, 32), "float32", name="F", scope="local.fragment")
    layouts = layout_map_of(infer_layout(kernel([X], [F], [op(Copy.build(X, F))]), GPU)["k"])
    assert layouts["F"].is_equal(make_linear_fragment([16, 32], 128))


def test_cpu_inference_runs_and_is_trivial():
    layouts = layout_map_of(infer_layout(gemm_bias_module(), CPU)["k"])
    assert set(layouts) == {"C_local", "bias_local"}  # shared buffers are plain on the CPU
    for frag in layouts.values():
        assert int(frag.get_thread_size()) == 1
        counts = frag.ownership_counts()
        assert np.all(counts == 1)


def test_layout_encoding_round_trips():
    frag = make_mma_block_fragment(64, 32, 2, 1).replicate(2)
    back = decode_layout(encode_layout(frag))
    assert isinstance(back, Fragment) and back.is_equal(frag)


def test_warp_policy_full_row_puts_all_warps_on_rows():
    from tile.ir.ops.layout_rules import gemm_fragments, warp_partition

    assert warp_partition(64, 64, 4, 16, 8, policy=0) == (2, 2)
    assert warp_partition(64, 64, 4, 16, 8, policy=1) == (4, 1)
    assert warp_partition(64, 64, 4, 16, 8, policy=2) == (1, 4)
    c, _a, _b = gemm_fragments(64, 64, 128, GPU.capabilities, "float16", 32, policy=1)
    assert c.is_equal(make_mma_block_fragment(64, 64, 4, 1))


def _owners(frag, row, cols):
    """The threads holding row ``row`` of a 2-D fragment, or element ``row`` of a 1-D one."""
    out = set()
    for coord, _rep, thread, _local in frag.enumerate_threads():
        if coord[0] == row and (cols is None or len(coord) == 2):
            out.add(int(thread))
    return out


def test_tiles_of_different_widths_share_their_row_statistic():
    # FlashAttention/MLA with no mma layout (8 rows on 128 threads): the row max is filled
    # before either tile is bound, S (8 x 16) is reduced into it, and O (8 x 32) is scaled
    # by it. The statistic must not take a binding of its own from its T.fill, and O (Acc) must
    # own each row on the threads that own it in S and in the statistic.
    S = tirx.decl_buffer((8, 16), "float32", name="S", scope="local.fragment")
    Acc = tirx.decl_buffer((8, 32), "float32", name="Acc", scope="local.fragment")
    m = tirx.decl_buffer((8,), "float32", name="m", scope="local.fragment")
    Out = tirx.decl_buffer((8, 32), "float32", name="Out")
    stmts = [
        op(Fill.build(m, tirx.const(0.0, "float32"))),
        parallel([8, 16], lambda i, j: tirx.BufferStore(S, tirx.Cast("float32", i + j), [i, j])),
        op(Reduce.build("max", S, m, 1, False)),
        parallel([8, 32], lambda i, j: tirx.BufferStore(Acc, tirx.BufferLoad(m, [i]), [i, j])),
        op(Copy.build(Acc, Out)),
    ]
    layouts = layout_map_of(infer_layout(kernel([Out], [S, Acc, m], stmts), GPU)["k"])
    for row in range(8):
        owners = _owners(layouts["m"], row, None)
        assert owners == _owners(layouts["S"], row, 16) == _owners(layouts["Acc"], row, 32)
        assert len(owners) == 16  # all 128 threads work: 16 per row


def test_tile_scaled_by_a_one_thread_row_statistic_follows_it():
    # flash-decoding's combine: a (16 x 1) tile of weights on 16 of 128 threads is reduced into
    # a statistic with one thread per row; a (16 x 16) tile first met in a loop that does not
    # read the statistic is later divided by it. The tile must keep each row on the
    # statistic's thread (its row-major default would put row i on threads 16 i % 128 + j,
    # and the division would conflict).
    W = tirx.decl_buffer((16, 1), "float32", name="W", scope="local.fragment")
    total = tirx.decl_buffer((16,), "float32", name="total", scope="local.fragment")
    Acc = tirx.decl_buffer((16, 16), "float32", name="Acc", scope="local.fragment")
    Out = tirx.decl_buffer((16, 16), "float32", name="Out")
    stmts = [
        parallel([16, 1], lambda i, j: tirx.BufferStore(W, tirx.Cast("float32", i + j), [i, j])),
        op(Reduce.build("sum", W, total, 1, True)),
        parallel([16, 16], lambda i, j: tirx.BufferStore(Acc, tirx.Cast("float32", i * j), [i, j])),
        parallel(
            [16, 16],
            lambda i, j: tirx.BufferStore(
                Acc, tirx.BufferLoad(Acc, [i, j]) / tirx.BufferLoad(total, [i]), [i, j]
            ),
        ),
        op(Copy.build(Acc, Out)),
    ]
    layouts = layout_map_of(infer_layout(kernel([Out], [W, total, Acc], stmts), GPU)["k"])
    assert layouts["total"].replicate_size == 1
    for row in range(16):
        owners = _owners(layouts["total"], row, None)
        assert len(owners) == 1
        assert owners == _owners(layouts["W"], row, 1) == _owners(layouts["Acc"], row, 16)


def test_gemm_without_a_warpgroup_form_takes_the_mma_sync_layout():
    # sm_90a-like: the warpgroup shape first, but its instruction list has no float32 (tf32)
    # form: a float32 gemm gets the warps' m16n8 fragment, a float16 one the warpgroup's
    from dataclasses import replace

    from tile.ir.backend import MmaInstruction
    from tile.ir.ops.layout_rules import gemm_fragments, has_warpgroup_form, warpgroup_fragment

    caps = replace(
        GPU.capabilities,
        mma_shapes=((64, 256, 16), (16, 8, 16), (16, 8, 8)),
        mma_instructions=(
            MmaInstruction(64, 256, 16, "float16", "float32"),
            MmaInstruction(16, 8, 16, "float16", "float32"),
            MmaInstruction(16, 8, 8, "float32", "float32"),
        ),
    )
    assert has_warpgroup_form(caps, "float16", "float32")
    assert not has_warpgroup_form(caps, "float32", "float32")
    assert not has_warpgroup_form(caps, "float16", "float16")
    # 128 query rows on one warpgroup: the two layouts differ (warp w: rows 16w + 64r vs 32w..)
    c16, _a, _b = gemm_fragments(128, 64, 128, caps, "float16", 32, policy=1, c_dtype="float32")
    assert c16.is_equal(warpgroup_fragment(128, 64, 128, 256, 1))
    c32, _a, _b = gemm_fragments(128, 64, 128, caps, "float32", 32, policy=1, c_dtype="float32")
    assert c32.is_equal(make_mma_block_fragment(128, 64, 4, 1))
    assert not c32.is_equal(c16)


def test_a_fragment_read_outside_t_parallel_is_held_whole_by_every_thread():
    """``if mask[k]:`` in a serial loop runs on every thread: each must hold every element
    (TileLang's block-sparse attention; a fragment spread over the threads read each
    thread's own element there instead of element k, a silent wrong result)."""
    Mask = tirx.decl_buffer((4,), "bool", name="Mask")
    C = tirx.decl_buffer((4,), "float32", name="C")
    m = tirx.decl_buffer((4,), "bool", name="mask", scope="local.fragment")
    k = tirx.Var("k", "int32")
    store = tirx.BufferStore(C, tirx.const(1.0, "float32"), [k])
    guarded = tirx.IfThenElse(tirx.BufferLoad(m, [k]), store, None)
    stmts = [op(Copy.build(Mask, m)), tirx.For(k, 0, 4, tirx.ForKind.SERIAL, guarded)]
    layout = layout_map_of(infer_layout(kernel([Mask, C], [m], stmts), GPU)["k"])["mask"]
    assert isinstance(layout, Fragment)
    for e in range(4):
        assert sorted(layout.owners((e,))) == list(range(128))
    cpu = layout_map_of(infer_layout(kernel([Mask, C], [m], stmts, threads=1), CPU)["k"])["mask"]
    assert sorted(cpu.owners((3,))) == [0]


def test_a_row_walked_by_a_serial_loop_inside_t_parallel_stays_on_its_iterations_thread():
    # TileLang's reducer tests: ``for i in T.Parallel(M): for k in T.serial(K): acc[i] += src[i, k]``
    # with ``src`` loaded by a T.copy. The nest is bound first (it decides before the copy); each
    # row of ``src`` must sit whole on the thread(s) running iteration ``i``, in consecutive
    # registers, or the serial loop reads another thread's register.
    Src = tirx.decl_buffer((8, 16), "float32", name="Src")
    src = tirx.decl_buffer((8, 16), "float32", name="src", scope="local.fragment")
    acc = tirx.decl_buffer((8,), "float32", name="acc", scope="local.fragment")
    # a local dim between two nest dims: cube[i, k, j] under ``for k in T.serial(4)``
    cube = tirx.decl_buffer((4, 4, 8), "float32", name="cube", scope="local.fragment")
    Out = tirx.decl_buffer((4, 8), "float32", name="Out")
    k = tirx.Var("k", "int32")

    def walk_row(i):
        body = tirx.BufferStore(acc, tirx.BufferLoad(acc, [i]) + tirx.BufferLoad(src, [i, k]), [i])
        return tirx.For(k, 0, 16, tirx.ForKind.SERIAL, body)

    def walk_cube(i, j):
        body = tirx.BufferStore(Out, tirx.BufferLoad(cube, [i, k, j]), [i, j])
        return tirx.For(k, 0, 4, tirx.ForKind.SERIAL, body)

    stmts = [op(Copy.build(Src, src)), parallel([8], walk_row, "i"), parallel([4, 8], walk_cube)]
    func = infer_layout(kernel([Src, Out], [src, acc, cube], stmts), GPU)["k"]
    layouts = layout_map_of(func)
    loops = []
    tvm_ffi.structural_walk(func.body, (tirx.For, loops.append), order="pre")
    nest = decode_layout(loops[0].annotations[LOOP_FRAGMENT])
    for row in range(8):
        runners = {int(t) for c, _r, t, _l in nest.enumerate_threads() if c == (row,)}
        assert runners and _owners(layouts["src"], row, 16) == runners == _owners(layouts["acc"], row, None)
    # on each owner, a row's 16 elements are 16 consecutive registers
    for thread in {int(t) for _c, _r, t, _l in layouts["src"].enumerate_threads()}:
        held = sorted((int(loc[0]), c) for c, _r, t, loc in layouts["src"].enumerate_threads()
                      if int(t) == thread)
        for first in range(0, len(held), 16):
            run = held[first:first + 16]
            assert [c[1] for _l, c in run] == list(range(16)) and len({c[0] for _l, c in run}) == 1
            assert [loc for loc, _c in run] == list(range(run[0][0], run[0][0] + 16))
    # the middle dim of the cube follows its serial loop: (i, *, j) on the threads of (i, j)
    owners = {(c[0], c[2]): set() for c, *_ in layouts["cube"].enumerate_threads()}
    for c, _r, t, _l in layouts["cube"].enumerate_threads():
        owners[(c[0], c[2])].add((c[1], int(t)))
    for cell, held in owners.items():
        threads = {t for _k, t in held}
        assert {kk for kk, _t in held} == set(range(4))
        assert all((kk, t) in held for kk in range(4) for t in threads), cell
