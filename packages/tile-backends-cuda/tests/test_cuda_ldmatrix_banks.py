"""ldmatrix / stmatrix row addresses hit 32 distinct banks (the ISA oracle's rule).

The kernel is lowered with the backend's own pass list; every ``tile_ldmatrix_*`` call's
row pointer (a ``tvm_access_ptr`` into the operand's shared tile, after
``apply_shared_layouts`` maps it through the tile's swizzle) is evaluated for the 32
lanes of warp 0 with every loop variable at each of its first values, and each 8x8
matrix's 8 row addresses are checked with ``isa_tables.ldmatrix_matrix_conflict_free``.
Stored row-major, a 64-byte row pitch puts rows r and r + 2 on the same 4 banks.
"""

from __future__ import annotations

import operator
from typing import Any

import pytest
import tvm_ffi
from _cuda_lowering import lowered as _lowered
from tvm import ir, tirx

from tile.testsupport import isa_tables as isa
from tile.testsupport.kernels import pipelined_gemm


def _ldmatrix_rows(func: Any) -> list[tuple[str, Any, list[Any]]]:
    """``(call name, row offset expression, loop vars around it)`` of every ldmatrix call."""
    found: list[tuple[str, Any, list[Any]]] = []

    def visit(node: Any, loops: list[Any]) -> None:
        if isinstance(node, tirx.For):
            visit(node.body, [*loops, node])
        elif isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                visit(stmt, loops)
        elif isinstance(node, tirx.IfThenElse):
            visit(node.then_case, loops)
            if node.else_case is not None:
                visit(node.else_case, loops)
        elif isinstance(node, tirx.AttrStmt):
            visit(node.body, loops)
        elif isinstance(node, tirx.Evaluate) and isinstance(node.value, ir.Call):
            call = node.value
            name = str(call.args[0].value) if call.args and hasattr(call.args[0], "value") else ""
            if name.startswith(("tile_ldmatrix", "tile_stmatrix")):
                # ldmatrix(registers, row pointer); stmatrix(row pointer, registers)
                ptr = call.args[2] if name.startswith("tile_ldmatrix") else call.args[1]
                assert str(ptr.op.name) == "tirx.tvm_access_ptr", ptr
                found.append((name, ptr.args[2], loops))

    visit(func.body, [])
    return found


def _thread_var(func: Any) -> Any:
    found: list[Any] = []

    def on_attr(node: Any) -> None:
        if str(node.attr_key) == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x":
            found.append(node.node.var)

    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, on_attr))
    return found[0]


_OPS = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "FloorDiv": operator.floordiv,
    "FloorMod": operator.mod, "BitwiseXor": operator.xor, "BitwiseAnd": operator.and_,
    "BitwiseOr": operator.or_, "ShiftRight": operator.rshift, "ShiftLeft": operator.lshift,
    "Min": min, "Max": max,
}  # fmt: skip


def _evaluate(expr: Any, table: dict[Any, int]) -> int:
    """An integer index expression at the given variable values (others, block indices: 0)."""
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, ir.Var):
        return next((value for var, value in table.items() if expr.same_as(var)), 0)
    kind = type(expr).__name__
    if kind == "Cast":
        return _evaluate(expr.value, table)
    if kind in _OPS:
        return int(_OPS[kind](_evaluate(expr.a, table), _evaluate(expr.b, table)))
    raise NotImplementedError(f"{kind}: {expr}")


def _conflicting_matrices(func: Any, element_bytes: int) -> list[str]:
    tx = _thread_var(func)
    bad: list[str] = []
    for name, offset, loops in _ldmatrix_rows(func):
        num = int(name.split("_x")[1].split("_")[0])
        for first in range(2):  # the first two values of every loop around the call
            values = {
                loop.loop_var: int(loop.min.value) + min(first, int(loop.extent.value) - 1) for loop in loops
            }
            rows = [_evaluate(offset, {**values, tx: lane}) * element_bytes for lane in range(32)]
            for q in range(num):
                matrix = rows[8 * q : 8 * q + 8]
                assert isa is not None
                if not isa.ldmatrix_matrix_conflict_free(matrix):
                    bad.append(f"{name} matrix {q} rows at bytes {matrix}")
    return bad


@pytest.mark.parametrize(
    ("block", "transpose_b"),
    [((128, 128, 32), False), ((64, 64, 64), False), ((128, 128, 32), True)],
    ids=["paper-128x128x32", "64x64x64", "transposed-B"],
)
def test_sm80_gemm_ldmatrix_rows_are_conflict_free(block: tuple[int, int, int], transpose_b: bool) -> None:
    bm, bn, bk = block
    main = pipelined_gemm(256, 256, 256, bm, bn, bk, "float16", trans_b=transpose_b, num_stages=3)
    func = _lowered(main, "sm_80")
    assert _ldmatrix_rows(func), "the sm_80 gemm loads its operands with ldmatrix"
    assert _conflicting_matrices(func, 2) == []


def epilogue_gemm_kernel(bm: int, bn: int, threads: int, n: int = 256, k: int = 64) -> Any:
    """An fp16 GEMM whose epilogue copies the float32 accumulator into a 16-bit shared tile."""
    return pipelined_gemm(n, n, k, bm, bn, 32, "float16", threads=threads, out_dtype="float16")


@pytest.mark.parametrize(("bm", "bn", "threads"), [(128, 128, 128), (64, 64, 128), (128, 256, 256)])
def test_sm90a_stmatrix_epilogue_rows_are_conflict_free(bm: int, bn: int, threads: int) -> None:
    func = _lowered(epilogue_gemm_kernel(bm, bn, threads), "sm_90a")
    stores = [row for row in _ldmatrix_rows(func) if row[0].startswith("tile_stmatrix")]
    assert stores, "the epilogue stores C with stmatrix"
    assert _conflicting_matrices(func, 2) == []
