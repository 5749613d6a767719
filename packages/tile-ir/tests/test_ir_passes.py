"""Before/after pairs for the passes; IR is built by hand, nothing runs on a device."""

import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.annotations import NUM_STAGES, PARALLEL_LOOP, PIPELINED_LOOP, THREAD_ID_READS
from tile.ir.backend import Capabilities
from tile.ir.errors import TileVerifyError, UnsupportedOnTargetError
from tile.ir.target import Target
from tile.ir.transform import (
    CompileContext,
    lower_tile_ops,
    run_pipeline,
    serialize_block_grid,
    serialize_pipelined_loops,
    vectorize_parallel_loops,
    verify,
)
from tile.testsupport.kernels import shared_copy_module

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 20, frozenset({"float32"}), 256, True, False))


def module(params, body):
    return tvm.IRModule({"k": tirx.PrimFunc(params, body).with_attr("global_symbol", "k")})


def launch(tag, extent, body, var=None):
    var = var if var is not None else tirx.Var(tag.split(".")[0][:5] + tag[-1], "int32")
    iv = tirx.IterVar(ir.Range(0, extent), var, 1, tag)
    return tirx.AttrStmt(iv, "thread_extent", extent, body), var


def collect(mod, kind):
    found = []
    tvm_ffi.structural_walk(mod["k"].body, (kind, found.append))
    return found


def copy_kernel(n):
    """One block per 32 elements copies A -> S (shared) -> B."""
    return shared_copy_module(n)


def test_lower_tile_ops_leaves_no_tile_calls_and_annotates_loops():
    after = lower_tile_ops(copy_kernel(64), CTX)
    verify(after, lowered=None)
    loops = collect(after, tirx.For)
    assert len(loops) == 2
    assert all(PARALLEL_LOOP in [str(k) for k in loop.annotations] for loop in loops)
    assert not collect(after, tirx.IfThenElse)  # 64 = 2 * 32: every access provably in bounds


def test_lower_tile_ops_guards_the_tail_tile():
    after = lower_tile_ops(copy_kernel(70), CTX)
    assert len(collect(after, tirx.IfThenElse)) == 1  # the store into B
    assert "if_then_else" in after.script()  # the load from A yields 0 outside


def test_verifier_rejects_tile_ops_after_lowering():
    with pytest.raises(TileVerifyError):
        verify(copy_kernel(64), lowered=True)


def test_vectorize_parallel_loops_vectorizes_innermost_only():
    C = tirx.decl_buffer((8, 16), "float32", name="C")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    store = tirx.BufferStore(C, tirx.const(1.0, "float32"), [i, j])
    inner = tirx.For(j, 0, 16, tirx.ForKind.SERIAL, store, annotations={PARALLEL_LOOP: 1})
    outer = tirx.For(i, 0, 8, tirx.ForKind.SERIAL, inner, annotations={PARALLEL_LOOP: 1})
    after = vectorize_parallel_loops(module([C], outer), CTX)
    loops = collect(after, tirx.For)
    kinds = {str(loop.loop_var): loop.kind for loop in loops}
    assert kinds == {"i": tirx.ForKind.SERIAL, "j": tirx.ForKind.VECTORIZED}
    assert all(PARALLEL_LOOP not in [str(k) for k in loop.annotations] for loop in loops)


def test_vectorize_parallel_loops_keeps_the_step_of_a_loop_around_a_parallel_one():
    # T.serial(0, 8, 2) around T.Parallel(2): rewriting the body must not drop the step (it did,
    # and each row then wrote all eight columns on the CPU).
    C = tirx.decl_buffer((8,), "float32", name="C")
    j, c = tirx.Var("j", "int32"), tirx.Var("c", "int32")
    store = tirx.BufferStore(C, tirx.const(1.0, "float32"), [j + c])
    inner = tirx.For(c, 0, 2, tirx.ForKind.SERIAL, store, annotations={PARALLEL_LOOP: 1})
    outer = tirx.For(j, 0, 8, tirx.ForKind.SERIAL, inner, step=tirx.const(2, "int32"))
    after = vectorize_parallel_loops(module([C], outer), CTX)
    steps = {str(loop.loop_var): loop.step for loop in collect(after, tirx.For)}
    assert int(steps["j"]) == 2 and steps["c"] is None


def test_serialize_pipelined_loops_strips_annotations():
    C = tirx.decl_buffer((8,), "float32", name="C")
    k = tirx.Var("k", "int32")
    loop = tirx.For(
        k,
        0,
        8,
        tirx.ForKind.SERIAL,
        tirx.BufferStore(C, tirx.const(0.0, "float32"), [k]),
        annotations={PIPELINED_LOOP: 1, NUM_STAGES: 3},
    )
    after = serialize_pipelined_loops(module([C], loop), CTX)
    (out,) = collect(after, tirx.For)
    assert out.kind == tirx.ForKind.SERIAL and len(out.annotations) == 0


def test_serialize_block_grid_fuses_blocks_into_one_parallel_loop():
    C = tirx.decl_buffer((3, 5), "int32", name="C")
    bx, by = tirx.Var("bx", "int32"), tirx.Var("by", "int32")
    store = tirx.BufferStore(C, by * 5 + bx, [by, bx])
    body, _ = launch("threadIdx.x", 128, store)
    body, _ = launch("blockIdx.y", 3, body, by)
    body, _ = launch("blockIdx.x", 5, body, bx)
    after = serialize_block_grid(module([C], body), CTX)
    assert not collect(after, tirx.AttrStmt)
    (loop,) = collect(after, tirx.For)
    assert loop.kind == tirx.ForKind.PARALLEL and int(loop.extent) == 15
    import numpy as np

    out = np.zeros((3, 5), "int32")
    tvm.compile(after, target="llvm")["k"](out)
    np.testing.assert_array_equal(out, np.arange(15).reshape(3, 5))


def test_serialize_block_grid_rejects_thread_id_reads():
    C = tirx.decl_buffer((128,), "float32", name="C")
    tx = tirx.Var("tx", "int32")
    body, _ = launch("threadIdx.x", 128, tirx.BufferStore(C, tirx.const(1.0, "float32"), [tx]), tx)
    body, _ = launch("blockIdx.x", 1, body)
    mod = module([C], body)
    mod = tvm.IRModule({"k": mod["k"].with_attr(THREAD_ID_READS, ["kern.py:7:4"])})
    with pytest.raises(UnsupportedOnTargetError) as info:
        serialize_block_grid(mod, CTX)
    assert info.value.location is not None and info.value.location.line == 7


def test_run_pipeline_dumps_every_stage(tmp_path, monkeypatch):
    from tile.ir.transform import (
        INFER_LAYOUT,
        LOWER_TILE_OPS,
        NORMALIZE,
        SERIALIZE_BLOCK_GRID,
        VECTORIZE_PARALLEL_LOOPS,
    )

    monkeypatch.setenv("TILE_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILE_VERIFY_EACH_PASS", "1")
    passes = [NORMALIZE, INFER_LAYOUT, LOWER_TILE_OPS, VECTORIZE_PARALLEL_LOOPS, SERIALIZE_BLOCK_GRID]
    run_pipeline(copy_kernel(70), passes, CTX)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00-input.py",
        "01-normalize.py",
        "02-infer_layout.py",
        "03-lower_tile_ops.py",
        "04-vectorize_parallel_loops.py",
        "05-serialize_block_grid.py",
    ]
    assert "tile.copy" in (tmp_path / "00-input.py").read_text()
    assert "T.parallel" in (tmp_path / "05-serialize_block_grid.py").read_text()
