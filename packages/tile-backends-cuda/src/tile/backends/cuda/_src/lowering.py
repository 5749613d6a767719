"""CUDA lowering rules for copy, fill, reduce, cumsum and atomics (not gemm).

The rules are the GPU layer's SIMT rules (:mod:`tile.ir.gpu.simt_lowering`), registered
for ``cuda``. What is CUDA's own: a fragment stored to a 16-bit shared tile goes through
``stmatrix`` on sm_90+ where its layout allows (:mod:`.stmatrix`); every other copy, and
the fragments ``T.cumsum`` stages through shared memory, take the SIMT copy rule.
"""

from __future__ import annotations

from typing import Any

from tile.ir.gpu import lower_copy_simt, register_simt_lowerings
from tile.ir.ops import Copy, LowerContext, TileOp

TARGET_KIND = "cuda"


def lower_copy_cuda(op: TileOp, ctx: LowerContext) -> Any:
    """``stmatrix`` where it applies (sm_90+, 16-bit shared tiles), else the SIMT copy rule."""
    assert isinstance(op, Copy)
    from .stmatrix import stmatrix_copy  # imports the gemm module, which imports this one

    stored = stmatrix_copy(op, ctx)
    if stored is not None:
        return stored
    return lower_copy_simt(op, ctx)


register_simt_lowerings(TARGET_KIND, copy=lower_copy_cuda)
