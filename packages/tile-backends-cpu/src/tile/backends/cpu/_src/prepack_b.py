"""Pass ``prepack_b``: a bf16 B operand that many blocks share is packed once per launch, not once per block.

``vdpbf16ps`` multiplies K pairs, so the bf16 micro-kernel (ukernels.py) reads B as
pair-interleaved panels of 64 columns, and ``tile_bf16_gemm_f32acc`` packs them from
B's rows at each call. In a GEMM grid every block of a block column packs the same
panels again, from rows one tensor row apart (one page apart for a 2048-wide bf16 B):
in the 2048^3 bf16 GEMM the packing took about a sixth of the time.

Where the kernel's gemm calls read B in place from a kernel parameter, this pass puts
one parallel loop before the block loop that packs the whole tensor
(``tile_bf16_pack_b_group`` per 64-column group, into a workspace as large as B), and
turns the calls into ``tile_bf16_gemm_f32acc_packed_b``, which reads the panels where
they lie. It applies when, for a 2-D bfloat16 parameter ``B`` of static shape:

- every ukernel call reading ``B`` is inside the same top-level parallel loop (the
  block grid) and has the same transpose flag;
- each call's K extent is even, its first K row is even and its first column a
  multiple of 64 (provable from the loop ranges), so its panels start on a packed pair
  and group boundary;
- nothing in the kernel may write ``B`` (no store to it; it is not passed by address
  to anything but these calls);
- the calls read at least ``MIN_REUSE`` times as many B elements as ``B`` has (summed
  over their enclosing loops), so that the extra pass over B pays for itself.

Anything else keeps the packing calls as they are.

Needs: the ukernel calls of ``lower_gemm_cpu`` and the block grid as a parallel loop
(``serialize_block_grid``). Guarantees: the kernel computes the same values.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import GRID_SERIALIZED

from .gemm import _cast
from .read_in_place import _ranges
from .ukernels import BF16_GEMM_SYMBOL, BF16_PACK_B_SYMBOL, BF16_PACKED_GEMM_SYMBOL

GROUP_COLUMNS = 64
"""Columns per packed group: ``TILE_NC`` in ukernels/bf16_gemm.c."""
SLICE_COLUMNS = 32
"""Columns per slice of a group, each K pair of a slice contiguous: ``TILE_SC`` in ukernels/bf16_gemm.c."""
MIN_REUSE = 2
"""Packing a B the calls read fewer times over than this costs more than it saves."""

# call_extern argument positions of tile_bf16_gemm_f32acc (after the symbol name).
_M, _N, _K, _A, _A1, _LDA, _B, _B1, _LDB, _C, _LDC, _TA, _TB, _ACC = range(1, 15)


@dataclasses.dataclass
class _Use:
    call: Any
    loop: Any  # the top-level parallel loop the call is in, or None
    trips: int | None  # product of the static extents of the loops around the call


def _symbol(call: Any) -> str | None:
    if not isinstance(call, ir.Call) or not isinstance(call.op, ir.Op) or call.op.name != "tirx.call_extern":
        return None
    head = call.args[0]
    return str(head.value) if isinstance(head, ir.StringImm) else None


def _loaded_buffer(pointer: Any) -> Any:
    """The buffer behind ``address_of(B[...])``, else None."""
    op = getattr(pointer, "op", None)
    if isinstance(pointer, ir.Call) and isinstance(op, ir.Op) and op.name == "tirx.address_of":
        load = pointer.args[0]
        if isinstance(load, ir.TensorLoad):
            return load.source
    return None


def _int(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _collect(body: Any) -> list[_Use]:
    uses: list[_Use] = []

    def visit(stmt: Any, loop: Any, trips: int | None, depth: int) -> None:
        if isinstance(stmt, tirx.For):
            extent = _int(stmt.extent)
            inner = None if trips is None or extent is None else trips * extent
            top = loop
            if loop is None and stmt.kind == tirx.ForKind.PARALLEL and depth == 0:
                top = stmt
            visit(stmt.body, top, inner, depth + 1)
            return
        if isinstance(stmt, tirx.Evaluate):
            if _symbol(stmt.value) == BF16_GEMM_SYMBOL:
                uses.append(_Use(stmt.value, loop, trips))
            return
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, loop, trips, depth)
            return
        for name in ("body", "then_case", "else_case"):
            child = getattr(stmt, name, None)
            if isinstance(child, tirx.Stmt):
                # Loops (For, While) count towards the depth; a block loop is at depth 0.
                visit(child, loop, trips, depth + isinstance(stmt, tirx.While))

    visit(body, None, 1, 0)
    return uses


def _read_only(body: Any, buffer: Any, calls: list[Any]) -> bool:
    """Nothing but ``calls`` (two pointers each) takes B's address, and nothing stores to it."""
    stores = tvm_ffi.structural_walk(
        body,
        (tirx.BufferStore, lambda s: tvm_ffi.VisitInterrupt(True) if s.buffer.same_as(buffer) else None),
    )
    if stores is not None:
        return False
    addresses = [0]

    def on_call(call: Any) -> None:
        loaded = _loaded_buffer(call)
        if loaded is not None and loaded.same_as(buffer):
            addresses[0] += 1

    tvm_ffi.structural_walk(body, (ir.Call, on_call))
    return addresses[0] == 2 * len(calls)


def _multiple(analyzer: Any, expr: Any, factor: int) -> bool:
    return bool(analyzer.can_prove(tirx.floormod(expr, factor) == 0))


def _plan(func: Any, buffer: Any, uses: list[_Use], analyzer: Any) -> tuple[Any, int, int, int] | None:
    """(the block loop, rows_k, cols_n, trans_b) when ``buffer``'s calls can read prepacked panels."""
    shape = [_int(d) for d in buffer.shape]
    if len(shape) != 2 or None in shape or len(buffer.strides) or str(buffer.dtype) != "bfloat16":
        return None
    loop = uses[0].loop
    if loop is None or not all(u.loop is not None and u.loop.same_as(loop) for u in uses):
        return None
    flags = {_int(u.call.args[_TB]) for u in uses}
    if len(flags) != 1 or None in flags:
        return None
    trans_b = flags.pop()
    assert trans_b is not None
    rows_k, cols_n = (shape[1], shape[0]) if trans_b else (shape[0], shape[1])
    assert rows_k is not None and cols_n is not None
    read = 0
    for use in uses:
        k, n = _int(use.call.args[_K]), _int(use.call.args[_N])
        if k is None or n is None or k % 2 or use.trips is None:
            return None
        index = list(use.call.args[_B].args[0].indices)
        k_lo, j_lo = (index[1], index[0]) if trans_b else (index[0], index[1])
        if not (_multiple(analyzer, k_lo, 2) and _multiple(analyzer, j_lo, GROUP_COLUMNS)):
            return None
        read += use.trips * k * n
    if read < MIN_REUSE * rows_k * cols_n:
        return None
    if not _read_only(func.body, buffer, [u.call for u in uses]):
        return None
    return loop, rows_k, cols_n, trans_b


def prepack_b(func: Any) -> Any:
    """Pack shared bf16 B operands once per launch (module docstring)."""
    uses = _collect(func.body)
    if not uses:
        return func
    # The uses of each parameter (Python wrappers of one buffer differ, so match with same_as).
    by_param: list[list[_Use]] = [[] for _ in func.params]
    for use in uses:
        buffer = _loaded_buffer(use.call.args[_B])
        for param, param_uses in zip(func.params, by_param, strict=True):
            if buffer is not None and buffer.same_as(param):
                param_uses.append(use)
    analyzer = _ranges(func)
    replace: list[tuple[Any, Any]] = []  # (call, its replacement)
    before: list[tuple[Any, list[Any]]] = []  # (a block loop's variable, statements to run before it)
    for buffer, buffer_uses in zip(func.params, by_param, strict=True):
        if not buffer_uses:
            continue
        plan = _plan(func, buffer, buffer_uses, analyzer)
        if plan is None:
            continue
        loop, rows_k, cols_n, trans_b = plan
        pairs = (rows_k + 1) // 2
        groups = (cols_n + GROUP_COLUMNS - 1) // GROUP_COLUMNS
        group_stride = pairs * GROUP_COLUMNS
        packed = tirx.decl_buffer(
            (groups * group_stride,), "uint32", name=f"{buffer.name}_packed", scope="global"
        )
        g = tirx.Var("group", "int32")
        zero = tirx.const(0, "int32")
        pack = tirx.call_extern(
            "int32",
            BF16_PACK_B_SYMBOL,
            tirx.address_of(tirx.BufferLoad(buffer, [zero, zero])),
            tirx.address_of(tirx.BufferLoad(buffer, [zero, tirx.const(1, "int32")])),
            tirx.const(int(buffer.shape[1].value), "int32"),
            tirx.const(rows_k, "int32"),
            tirx.const(cols_n, "int32"),
            tirx.const(trans_b, "int32"),
            g,
            # An access pointer with its extent: TVM's buffer compaction sizes a buffer by the
            # elements its accesses name, and address_of(packed[i]) names only element i.
            tirx.tvm_access_ptr("uint32", packed, tirx.const(0, "int64"), groups * group_stride, 2),
        )
        stmts = next((s for var, s in before if var.same_as(loop.loop_var)), None)
        if stmts is None:
            stmts = []
            before.append((loop.loop_var, stmts))
        stmts.append(tirx.AllocBuffer(packed))
        stmts.append(tirx.For(g, 0, groups, tirx.ForKind.PARALLEL, tirx.Evaluate(pack)))
        for use in buffer_uses:
            args = list(use.call.args)
            index = list(args[_B].args[0].indices)
            k_lo, j_lo = (index[1], index[0]) if trans_b else (index[0], index[1])
            total = tirx.const(groups * group_stride, "int64")
            # the group's first 32-column slice, at the call's first K pair (ukernels/bf16_gemm.c panel_at)
            offset = tirx.floordiv(_cast("int64", j_lo), GROUP_COLUMNS) * group_stride + tirx.floordiv(
                _cast("int64", k_lo), 2
            ) * SLICE_COLUMNS
            offset = analyzer.simplify(offset)
            new = tirx.call_extern(
                "int32",
                BF16_PACKED_GEMM_SYMBOL,
                args[_M], args[_N], args[_K], args[_A], args[_A1], args[_LDA],
                tirx.tvm_access_ptr("uint32", packed, offset, total - offset, 1),
                tirx.const(group_stride, "int64"),
                args[_C], args[_LDC], args[_TA], args[_ACC],
            )
            replace.append((use.call, new))
    if not replace:
        return func

    def on_call(call: Any) -> Any:
        return next((new for old, new in replace if call.same_as(old)), call)

    body = tvm_ffi.structural_map(func.body, (ir.Call, on_call))

    def on_loop(loop: Any) -> Any:  # the block loops, found again by their loop variables
        stmts = next((s for var, s in before if loop.loop_var.same_as(var)), None)
        return loop if stmts is None else tirx.SeqStmt([*stmts, loop])

    return func.with_body(tvm_ffi.structural_map(body, (tirx.For, on_loop)))


SHARED_B_PREPACKED = Property("shared_b_prepacked", "a bf16 B read by many blocks is packed once per launch")
PREPACK_B = function_pass(prepack_b, needs={GRID_SERIALIZED}, guarantees={SHARED_B_PREPACKED})
