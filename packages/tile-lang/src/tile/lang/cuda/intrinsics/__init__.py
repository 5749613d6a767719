"""``tile.lang.cuda.intrinsics`` (TileLang's ``tilelang.cuda.intrinsics``): helpers for
hand-written tensor-core code on CUDA (expert tier).

* ``TensorCoreIntrinEmitter`` emits a block's ``ldmatrix`` / ``mma.sync`` code
  (``ldmatrix_a``, ``ldmatrix_b``, ``mma``, ``mma_atom``, ``stmatrix``) for float16,
  bfloat16, int8 and uint8 operands, A and B stored either way round, on tile's
  ``T.ptx_ldmatrix`` / ``T.ptx_mma`` (CUDA sm_80+; other targets refuse the kernel).
* ``get_swizzle_layout(i, j, row_size, dtype)``: the XOR swizzle of 16-byte chunks that
  keeps one ``ldmatrix`` matrix's rows in different banks, as ``(span, row, column)``.
* ``make_mma_swizzle_layout(buffer)``: tile's hardware swizzle for an operand tile
  (``T.annotate_layout``); ``get_mma_micro_size(dtype)``: ``(16, 16, k)``.
* ``get_ldmatrix_offset``, ``mma_store_index_map``: where lanes' rows and accumulators sit.

TileLang's other emitters (ladder-transform, INT4, sm_70/sm_120, wgmma, tcgen05) are not
provided: ``T.gemm`` picks tile's instructions for those cases.
"""

from ..._src.mma_emitter import TensorCoreIntrinEmitter as TensorCoreIntrinEmitter
from ..._src.mma_layouts import get_ldmatrix_offset as get_ldmatrix_offset
from ..._src.mma_layouts import get_mma_micro_size as get_mma_micro_size
from ..._src.mma_layouts import get_swizzle_layout as get_swizzle_layout
from ..._src.mma_layouts import make_mma_swizzle_layout as make_mma_swizzle_layout
from ..._src.mma_layouts import mma_store_index_map as mma_store_index_map
from . import layout as layout
from . import macro as macro

make_swizzle_layout = make_mma_swizzle_layout
"""TileLang's other spelling (``from ... import make_mma_swizzle_layout as make_swizzle_layout``)."""

__all__ = [
    "TensorCoreIntrinEmitter",
    "get_ldmatrix_offset",
    "get_mma_micro_size",
    "get_swizzle_layout",
    "make_mma_swizzle_layout",
    "make_swizzle_layout",
    "mma_store_index_map",
]
