"""Storage planning: shared-memory sizes, lifetimes, and the merged arena."""

import tvm
from tvm import tirx

from tile.ir.annotations import NUM_STAGES, PIPELINE_VERSIONED, PIPELINED_LOOP, SHARED_ARENA, SHARED_BYTES
from tile.ir.backend import Capabilities
from tile.ir.ops import Copy
from tile.ir.target import Target
from tile.ir.transform import CompileContext, plan_storage, storage_plan

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))

X = tirx.decl_buffer((64, 64), "float32", name="X")
Y = tirx.decl_buffer((64, 64), "float32", name="Y")


def shared(name, shape=(64, 64), dtype="float32"):
    return tirx.decl_buffer(shape, dtype, name=name, scope="shared.dyn")


def func(body):
    return tirx.PrimFunc([X, Y], tirx.SeqStmt(body)).with_attr("global_symbol", "k")


def copy(src, dst):
    return tirx.Evaluate(Copy.build(src, dst).encode())


def test_disjoint_lifetimes_share_bytes():
    s1, s2 = shared("S1"), shared("S2")
    body = [tirx.AllocBuffer(s1), tirx.AllocBuffer(s2), copy(X, s1), copy(s1, Y), copy(X, s2), copy(s2, Y)]
    plan = storage_plan(func(body))
    assert plan.sizes == {"S1": 16384, "S2": 16384}
    assert plan.lifetimes == {"S1": (0, 1), "S2": (2, 3)}
    assert plan.offsets == {"S1": 0, "S2": 0}
    assert plan.total_bytes == 16384 and plan.unmerged_bytes == 32768


def test_overlapping_lifetimes_get_disjoint_aligned_ranges():
    s1, s2 = shared("S1", (10, 10), "float16"), shared("S2")
    body = [
        tirx.AllocBuffer(s1),
        tirx.AllocBuffer(s2),
        copy(X[0:10, 0:10], s1),
        copy(X, s2),
        copy(s1, Y[0:10, 0:10]),
    ]
    mod = plan_storage(tvm.IRModule({"k": func(body)}), CTX)
    attrs = mod["k"].attrs
    offsets = {str(k): int(v) for k, v in attrs[SHARED_ARENA].items()}
    assert offsets["S2"] == 0 and offsets["S1"] == 16384  # larger first; S1 after it, 128-aligned
    assert int(attrs[SHARED_BYTES]) == 16384 + 200


def test_loop_widens_lifetimes_and_versioned_buffers_multiply():
    s1, s2 = shared("S1", (32, 32)), shared("S2", (32, 32))
    k = tirx.Var("k", "int32")
    inner = tirx.SeqStmt([copy(X[0:32, 0:32], s1), copy(s2, Y[0:32, 0:32])])
    notes = {PIPELINED_LOOP: 1, NUM_STAGES: 3, PIPELINE_VERSIONED: ["S1"]}
    loop = tirx.For(k, 0, 4, tirx.ForKind.SERIAL, inner, annotations=notes)
    body = [tirx.AllocBuffer(s1), tirx.AllocBuffer(s2), copy(X[0:32, 0:32], s2), loop]
    plan = storage_plan(func(body))
    assert plan.sizes == {"S1": 3 * 4096, "S2": 4096}
    assert plan.lifetimes["S1"] == (1, 2) and plan.lifetimes["S2"] == (0, 2)
    assert plan.total_bytes == 4 * 4096
