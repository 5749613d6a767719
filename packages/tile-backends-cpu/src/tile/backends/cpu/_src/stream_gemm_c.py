"""Pass ``stream_gemm_c``: the bf16 C of a large bf16 GEMM is rounded and written with non-temporal stores.

A bf16 GEMM block ends with its float32 accumulator rounded into the bf16 output,
``T.copy(C_local, C[by * BM, bx * BN])``, which lowers to a nest of ordinary stores right
after the micro-kernel call that computed ``C_local``::

    T.call_extern("int32", "tile_bf16_gemm_f32acc...", ..., T.address_of(C_local[0, 0]), ...)
    for i0, i1_o in T.grid(BM, E):
        for i1_v in T.vectorized(W):
            C[r0 + i0, c0 + (i1_o * W + i1_v)] = T.Cast("bfloat16", C_local[i0, i1_o * W + i1_v])

Each ordinary store first reads its line of ``C`` from memory (write allocate), and the
written lines then push out of the caches the A rows and B panels that the next blocks
read again. This pass replaces such a nest by ``tile_bf16_store_c`` (ukernels/bf16_gemm.c),
which rounds the same way as the generated cast and writes whole 64-byte lines with
non-temporal stores. On the 2048^3 bf16 GEMM (8 MiB of C) that measured 5-10% of the
program's CPU time at one thread (bench/RESULTS.md, branch ``amx4``).

It applies when:

- the statement before the nest, in the same sequence, is a bf16 micro-kernel call
  (``tile_bf16_gemm_f32acc`` or ``..._packed_b``) that takes ``C_local[0, 0]``'s address;
- ``C_local`` is a float32 2-D buffer of static shape ``(R, S)`` local to the block, the
  nest's outer loop runs its ``R`` rows and the inner loops its ``S`` columns contiguously
  (``i1_o * W + i1_v``, every loop from 0 with a static extent), and the nest is that one store;
- ``C`` is a compact 2-D bfloat16 kernel parameter the kernel never reads, written at
  ``C[r0 + i, c0 + j]`` (``r0``, ``c0`` free of the nest's loops), of at least
  ``stream_threshold_bytes()``: more than the L2 caches of the cores the kernel runs on
  hold, so its lines would not be found in cache by the next kernel anyway.

Anything else keeps the generated stores.

Needs: the ukernel calls of ``lower_gemm_cpu``, loops scheduled. Guarantees: the kernel
stores the same values to ``C``.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import PARALLEL_LOOPS_SCHEDULED

from .host import core_count, data_cache_bytes
from .prepack_b import _int, _loaded_buffer, _symbol
from .read_in_place import _mentions
from .stack_locals import _bytes
from .stream_stores import _untouched
from .ukernels import BF16_GEMM_SYMBOL, BF16_PACKED_GEMM_SYMBOL, BF16_STORE_C_SYMBOL

DEFAULT_L2_BYTES = 1 << 20
"""Per-core L2 assumed where sysfs reports no second-level cache."""


def stream_threshold_bytes() -> int:
    """The smallest bf16 C streamed: the L2 caches of the cores this process may run on, together."""
    levels = data_cache_bytes()
    return (levels[1] if len(levels) > 1 else DEFAULT_L2_BYTES) * core_count()


def _nest(stmt: Any) -> tuple[list[Any], Any] | None:
    """The loops of a perfect nest from 0 with static extents and the one store inside, else None."""
    loops = []
    while isinstance(stmt, tirx.For):
        if _int(stmt.min) != 0 or _int(stmt.extent) is None:
            return None
        if stmt.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.VECTORIZED, tirx.ForKind.UNROLLED):
            return None
        loops.append(stmt)
        stmt = stmt.body
    if not loops or not isinstance(stmt, tirx.BufferStore):
        return None
    return loops, stmt


def _rewrite(call: Any, nest: Any, outputs: list[Any], analyzer: Any) -> Any | None:
    """The ``tile_bf16_store_c`` call replacing ``nest`` (after ``call``), or None."""
    found = _nest(nest)
    if found is None:
        return None
    loops, store = found
    out = store.buffer
    if not any(out.same_as(o) for o in outputs) or len(store.indices) != 2:
        return None
    cast = store.value
    if not isinstance(cast, tirx.Cast) or str(cast.dtype) != "bfloat16":
        return None
    load = cast.value
    if not isinstance(load, ir.TensorLoad) or str(load.dtype) != "float32" or len(load.indices) != 2:
        return None
    local = load.source
    shape = [_int(d) for d in local.shape]
    if len(shape) != 2 or None in shape or len(local.strides) or local.scope() in ("global", ""):
        return None
    rows, cols = shape
    assert rows is not None and cols is not None
    if not any(_loaded_buffer(arg) is not None and _loaded_buffer(arg).same_as(local) for arg in call.args):
        return None
    # rows: the outer loop; columns: the inner loops, contiguous (row-major over their extents)
    row_var, inner = loops[0].loop_var, loops[1:]
    if _int(loops[0].extent) != rows or not inner:
        return None
    column: Any = tirx.const(0, "int32")
    span = 1
    for loop in inner:
        extent = _int(loop.extent)
        assert extent is not None
        column = column * extent + loop.loop_var
        span *= extent
    if span != cols:
        return None
    i_src, j_src = load.indices
    if not (analyzer.can_prove(i_src - row_var == 0) and analyzer.can_prove(j_src - column == 0)):
        return None
    r0 = analyzer.simplify(store.indices[0] - row_var)
    c0 = analyzer.simplify(store.indices[1] - column)
    if any(_mentions(x, loop.loop_var) for x in (r0, c0) for loop in loops):
        return None
    zero = tirx.const(0, "int32")
    return tirx.Evaluate(
        tirx.call_extern(
            "int32",
            BF16_STORE_C_SYMBOL,
            tirx.address_of(tirx.BufferLoad(out, [r0, c0])),
            out.shape[1],
            # an access pointer over all of C_local: TVM sizes the allocation by what the kernel accesses
            tirx.tvm_access_ptr("float32", local, zero, rows * cols, 1),
            cols,
            rows,
            cols,
            1,
        )
    )


def stream_gemm_c(func: Any) -> Any:
    """Round and stream the bf16 C of large bf16 GEMMs (module docstring)."""
    threshold = stream_threshold_bytes()
    outputs = [
        p
        for p in func.params
        if tirx.is_buffer_var(p)
        and str(p.dtype) == "bfloat16"
        and len(p.shape) == 2
        and not len(p.strides)
        and (_bytes(p) or 0) >= threshold
        and _untouched(func.body, p)
    ]
    if not outputs:
        return func
    analyzer = tvm.sym.Analyzer()
    changed = [False]

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        out = list(stmts)
        for k in range(1, len(stmts)):
            before = stmts[k - 1]
            if not isinstance(before, tirx.Evaluate):
                continue
            if _symbol(before.value) not in (BF16_GEMM_SYMBOL, BF16_PACKED_GEMM_SYMBOL):
                continue
            new = _rewrite(before.value, stmts[k], outputs, analyzer)
            if new is not None:
                out[k] = new
                changed[0] = True
        return tirx.SeqStmt(out) if any(not a.same_as(b) for a, b in zip(out, stmts, strict=True)) else seq

    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, on_seq))
    return func.with_body(body) if changed[0] else func


GEMM_C_STREAMED = Property(
    "gemm_c_streamed",
    "the bf16 C of a GEMM larger than the cores' L2 caches is rounded and written with non-temporal stores",
)
STREAM_GEMM_C = function_pass(stream_gemm_c, needs={PARALLEL_LOOPS_SCHEDULED}, guarantees={GEMM_C_STREAMED})
