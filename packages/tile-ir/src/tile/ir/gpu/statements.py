"""Small TIR statement builders the GPU lowerings share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]


def seq(stmts: Sequence[Any]) -> Any:
    """Statements as one (TVM refuses a ``SeqStmt`` of length 1)."""
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(list(stmts))


def extern_call(name: str, *args: Any) -> Any:
    """``name(args...)`` as a statement: a call into the vendor's device header."""
    return tirx.Evaluate(tirx.call_extern("void", name, *args))


def shared_barrier() -> Any:
    """``__syncthreads()`` as the intrinsic TVM's barrier placement recognizes."""
    return tirx.Evaluate(tirx.op.tvm_storage_sync("shared"))
