"""Pipeline planning: dependence analysis (RAW, WAR, atomics) and stage/order assignment."""

import pytest
import tvm
import tvm_ffi
from tvm import tirx

from tile.ir.annotations import NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINE_VERSIONED, PIPELINED_LOOP
from tile.ir.backend import Capabilities
from tile.ir.errors import PipelinePlanError
from tile.ir.ops import Copy, Gemm
from tile.ir.ops.atomic import Atomic
from tile.ir.target import Target
from tile.ir.transform import CompileContext, plan_pipeline

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))
HERE = tvm.ir.SourceName(__file__)

A = tirx.decl_buffer((128, 128), "float16", name="A")
B = tirx.decl_buffer((128, 128), "float16", name="B")
Out = tirx.decl_buffer((32, 32), "float32", name="Out")
A_s = tirx.decl_buffer((32, 32), "float16", name="A_s", scope="shared.dyn")
B_s = tirx.decl_buffer((32, 32), "float16", name="B_s", scope="shared.dyn")
C_l = tirx.decl_buffer((32, 32), "float32", name="C_local", scope="local.fragment")
D_l = tirx.decl_buffer((32, 32), "float16", name="D_local", scope="local.fragment")
K = tirx.Var("k", "int32")


def stmt(op, line):
    return tirx.Evaluate(op.encode(), span=tvm.ir.Span(HERE, line, line, 1, 5))


def load_a(line=10):
    return stmt(Copy.build(tirx.BufferLoad(A, [0, K * 32]), A_s), line)


def load_b(line=11):
    return stmt(Copy.build(tirx.BufferLoad(B, [K * 32, 0]), B_s), line)


def gemm(line=12):
    return stmt(Gemm.build(A_s, B_s, C_l, False, False, False), line)


def pipelined(stmts, num_stages=3, **user):
    notes = {PIPELINED_LOOP: 1, NUM_STAGES: num_stages}
    if "stage" in user:
        notes[PIPELINE_STAGE] = user["stage"]
    if "order" in user:
        notes[PIPELINE_ORDER] = user["order"]
    loop = tirx.For(K, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt(stmts), annotations=notes)
    func = tirx.PrimFunc([A, B, Out], loop).with_attr("global_symbol", "k")
    return tvm.IRModule({"k": func})


def planned(mod):
    out = plan_pipeline(mod, CTX)
    loops = []
    tvm_ffi.structural_walk(out["k"].body, (tirx.For, loops.append))
    notes = loops[0].annotations
    return [int(s) for s in notes[PIPELINE_STAGE]], [int(o) for o in notes[PIPELINE_ORDER]], notes


def test_gemm_body_copies_in_stage_zero_gemm_in_last_stage():
    stage, order, notes = planned(pipelined([load_a(), load_b(), gemm()], num_stages=3))
    assert stage == [0, 0, 2] and order == [0, 1, 2]
    assert sorted(str(b) for b in notes[PIPELINE_VERSIONED]) == ["A_s", "B_s"]


def test_war_on_a_shared_buffer_keeps_the_copy_with_its_readers():
    # The gemm reads A_s; a later copy writes the gemm's output into A_s (WAR + RAW),
    # so A_s has two writers and the next iteration's load must not overtake the gemm.
    back = stmt(Copy.build(D_l, A_s), 13)
    stage, _, notes = planned(pipelined([load_a(), load_b(), gemm(), back], num_stages=3))
    assert stage[0] >= stage[2] and stage[2] <= stage[3]
    assert stage[1] == 0  # B_s is still a versioned producer
    assert [str(b) for b in notes[PIPELINE_VERSIONED]] == ["B_s"]


def test_user_stage_breaking_a_carried_war_is_rejected_with_both_statements():
    back = stmt(Copy.build(D_l, A_s), 13)
    mod = pipelined([load_a(10), load_b(11), gemm(12), back], stage=[0, 0, 2, 2], order=[0, 1, 2, 3])
    with pytest.raises(PipelinePlanError) as info:
        plan_pipeline(mod, CTX)
    msg = info.value.message
    assert "A_s" in msg and "statement 0" in msg and "line 10" in msg and "next iteration" in msg


def test_atomic_never_moves_ahead_of_its_producer():
    atomic = stmt(Atomic.build("add", Out, C_l), 14)
    stage, order, _ = planned(pipelined([load_a(), load_b(), gemm(), atomic], num_stages=2))
    assert (stage[3], order[3]) > (stage[2], order[2])
    bad = pipelined([load_a(), load_b(), gemm(12), atomic], stage=[0, 0, 1, 0])
    with pytest.raises(PipelinePlanError) as info:
        plan_pipeline(bad, CTX)
    assert (
        "T.atomic" in info.value.message
        and "C_local" in info.value.message
        and "line 12" in info.value.message
    )


def test_user_order_must_be_a_permutation_of_the_body():
    with pytest.raises(PipelinePlanError):
        plan_pipeline(pipelined([load_a(), load_b(), gemm()], order=[0, 0, 1]), CTX)
    with pytest.raises(PipelinePlanError):
        plan_pipeline(pipelined([load_a(), load_b(), gemm()], stage=[0, 1]), CTX)


def test_valid_user_assignment_is_kept():
    stage, order, _ = planned(pipelined([load_a(), load_b(), gemm()], stage=[0, 0, 1], order=[1, 0, 2]))
    assert stage == [0, 0, 1] and order == [1, 0, 2]


def test_copy_into_a_reshape_is_a_write_of_the_buffer_it_views():
    # T.reshape(A_s, [16, 64]) filled by the copy, A_s read by the gemm: the gemm depends on
    # the copy, and A_s is not versioned through the view (the ring copies A_s, which the
    # view of one stage does not address); before, the two names looked independent.
    view = tirx.decl_buffer((16, 64), "float16", name="A_view", scope="shared.dyn", data=A_s.data)
    fill = stmt(Copy.build(tirx.BufferLoad(A, [0, K * 64]), view), 10)
    loop = tirx.For(
        K, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([fill, load_b(), gemm()]),
        annotations={PIPELINED_LOOP: 1, NUM_STAGES: 3},
    )  # fmt: skip
    body = tirx.SeqStmt([tirx.DeclBuffer(view, data=tirx.buffer_data(A_s)), loop])
    func = tirx.PrimFunc([A, B, Out], body).with_attr("global_symbol", "k")
    stage, _, notes = planned(tvm.IRModule({"k": func}))
    assert stage[0] == stage[2] and stage[1] == 0
    assert [str(b) for b in notes[PIPELINE_VERSIONED]] == ["B_s"]


def test_tiles_declared_in_the_body_move_before_the_loop():
    # TileLang's gemv declares its tiles inside T.Pipelined: a declaration's scope is the rest of
    # the body, which the pipeline takes apart; before the loop they stay in scope for every step
    mod = pipelined([tirx.AllocBuffer(A_s), load_a(), tirx.AllocBuffer(B_s), load_b(), gemm()], num_stages=2)
    out = plan_pipeline(mod, CTX)["k"].body
    assert isinstance(out, tirx.SeqStmt)
    *declared, loop = out.seq
    assert [str(d.buffer.name) for d in declared] == ["A_s", "B_s"] and isinstance(loop, tirx.For)
    assert not any(isinstance(s, tirx.AllocBuffer) for s in loop.body.seq)
    notes = loop.annotations
    assert [int(s) for s in notes[PIPELINE_STAGE]] == [0, 0, 1]  # the three statements, planned as usual
    assert sorted(str(b) for b in notes[PIPELINE_VERSIONED]) == ["A_s", "B_s"]


def test_a_declaration_whose_shape_uses_the_loop_variable_stays_in_the_body():
    sized = tirx.decl_buffer((K + 1,), "float32", name="sized", scope="local.fragment")
    mod = pipelined([load_a(), tirx.AllocBuffer(sized), load_b(), gemm()], num_stages=3)
    loop = plan_pipeline(mod, CTX)["k"].body
    assert isinstance(loop, tirx.For) and len(loop.body.seq) == 4
