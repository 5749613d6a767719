"""Normalization: folded extents, zero-based parallel loops, perfect parallel nests."""

import tvm
import tvm_ffi
from tvm import tirx

from tile.ir.annotations import PARALLEL_LOOP
from tile.ir.backend import Capabilities
from tile.ir.ops import Copy, decode
from tile.ir.target import Target
from tile.ir.transform import CompileContext, normalize

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, False))


def module(body, params):
    return tvm.IRModule({"k": tirx.PrimFunc(params, body).with_attr("global_symbol", "k")})


def test_parallel_nest_is_shifted_folded_and_made_perfect():
    C = tirx.decl_buffer((8, 16), "float32", name="C")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    store = tirx.BufferStore(C, tirx.const(1.0, "float32"), [i, j])
    two = tirx.const(2, "int32")
    inner = tirx.For(j, 0, two * 8, tirx.ForKind.SERIAL, store, annotations={PARALLEL_LOOP: 1})
    outer = tirx.For(i, 2, 6, tirx.ForKind.SERIAL, inner, annotations={PARALLEL_LOOP: 1})
    after = normalize(module(outer, [C]), CTX)
    loops = []
    tvm_ffi.structural_walk(after["k"].body, (tirx.For, loops.append), order="pre")
    assert [(int(lp.min), int(lp.extent)) for lp in loops] == [(0, 6), (0, 16)]
    assert loops[0].body.same_as(loops[1])  # one perfect nest
    assert "i + 2" in str(loops[1].body)
    tvm.ir.assert_structural_equal(normalize(after, CTX), after)  # idempotent


def test_regions_are_constant_folded():
    A = tirx.decl_buffer((64,), "float32", name="A")
    S = tirx.decl_buffer((32,), "float32", name="S", scope="shared.dyn")
    op = Copy.build(tirx.BufferLoad(A, [tirx.const(4, "int32") * 8]), S)
    body = tirx.SeqStmt([tirx.AllocBuffer(S), tirx.Evaluate(op.encode())])
    after = normalize(module(body, [A]), CTX)
    evals = []
    tvm_ffi.structural_walk(after["k"].body, (tirx.Evaluate, evals.append))
    copy = decode(evals[0].value)
    assert isinstance(copy.src.mins[0], tirx.IntImm) and int(copy.src.mins[0]) == 32
