"""Pass ``drop_block_barriers``: a block barrier (``T.sync_threads()``) on the CPU is a no-op.

A CPU block runs on one thread, so a barrier among a block's threads has nothing to
wait for; its writes are already visible to the block's later statements. LLVM code
generation has no lowering for ``tvm_storage_sync``, so the barriers are removed here
(kernels written for GPUs, with hand-placed barriers, then run unchanged).

Needs: lowered IR. Guarantees: the same program without ``tvm_storage_sync`` calls.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.transform import Property, function_pass
from tile.ir.transform.properties import TILE_OPS_LOWERED


def _is_barrier(stmt: Any) -> bool:
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return (
        isinstance(call, ir.Call) and isinstance(call.op, ir.Op) and call.op.name == "tirx.tvm_storage_sync"
    )


def drop_block_barriers(func: Any) -> Any:
    """Remove block barriers (module docstring)."""
    def on_evaluate(stmt: Any) -> Any:
        return tirx.Evaluate(tirx.const(0, "int32")) if _is_barrier(stmt) else stmt

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate)))


BLOCK_BARRIERS_DROPPED = Property("block_barriers_dropped", "no tvm_storage_sync call is left")
DROP_BLOCK_BARRIERS = function_pass(
    drop_block_barriers, needs={TILE_OPS_LOWERED}, guarantees={BLOCK_BARRIERS_DROPPED}
)
