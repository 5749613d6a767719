"""``mark_kernel_lines``: checked GPU kernels call ``tile::kernel_line`` before each statement
whose kernel line differs from the enclosing one's, never inside a vectorized loop and never
before a thread-extent scope (the emulator tests in tile-lang check the lines faults name)."""

from __future__ import annotations

import tvm_ffi
from tvm import ir, tirx

from tile.ir.gpu.kernel_lines import KERNEL_LINE, mark_kernel_lines


def span(line: int) -> ir.Span:
    return ir.Span(ir.SourceName("/src/kernel.py"), line, line, 5, 20)


def marks(stmt) -> list[str]:
    found: list[str] = []

    def visit(node) -> None:
        if str(node.op.name) == "tirx.call_extern" and str(node.args[0].value) == KERNEL_LINE:
            found.append(str(node.args[1].value))

    tvm_ffi.structural_walk(stmt, (ir.Call, visit))
    return found


def test_each_new_line_is_marked_once_and_vectorized_bodies_are_left_alone():
    a = tirx.decl_buffer((64,), "float32", name="A")
    i, j, k = tirx.Var("i", "int32"), tirx.Var("j", "int32"), tirx.Var("k", "int32")
    store_7 = tirx.BufferStore(a, tirx.const(1.0, "float32"), [i], span=span(7))
    store_7_again = tirx.BufferStore(a, tirx.const(2.0, "float32"), [i], span=span(7))
    loop_6 = tirx.For(i, 0, 8, tirx.ForKind.SERIAL, tirx.SeqStmt([store_7, store_7_again]), span=span(6))
    vector_store = tirx.BufferStore(a, tirx.const(0.0, "float32"), [j], span=span(10))
    vector_9 = tirx.For(j, 0, 4, tirx.ForKind.VECTORIZED, vector_store, span=span(9))
    plain = tirx.For(k, 0, 4, tirx.ForKind.SERIAL, tirx.BufferStore(a, tirx.const(3.0, "float32"), [k]))
    tx = tirx.IterVar(ir.Range(0, 32), tirx.Var("tx", "int32"), tirx.IterVar.ThreadIndex, "threadIdx.x")
    body = tirx.AttrStmt(tx, "thread_extent", 32, tirx.SeqStmt([loop_6, vector_9, plain]), span=span(4))
    func = tirx.PrimFunc([], body)
    out = mark_kernel_lines(func).body

    assert isinstance(out, tirx.AttrStmt)  # nothing before the thread scope
    # line 7 twice: each statement is marked against its enclosing loop's line (6), not its sibling's
    assert marks(out) == ["/src/kernel.py:6", "/src/kernel.py:7", "/src/kernel.py:7", "/src/kernel.py:9"]
    seq = out.body
    vector = next(s for s in seq.seq if isinstance(s, tirx.For) and s.kind == tirx.ForKind.VECTORIZED)
    assert isinstance(vector.body, tirx.BufferStore)  # its body keeps no call
