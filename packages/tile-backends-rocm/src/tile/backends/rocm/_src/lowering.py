"""The SIMT lowering rules for the ``hip`` target kind.

The CUDA backend's rules for ``T.copy``, ``T.fill``, ``T.reduce_*``, ``T.atomic_*``
and ``T.cumsum`` read everything target-specific from the capabilities (warp size,
vector width) and emit only calls into the device header's ``tile::`` names
(``tile::shfl_xor``, ``tile::atomic_add``, ...), which ``tile_hip.h`` implements for
wave64. So the same rule functions are registered for ``hip`` here: a reduction's
xor butterfly then spans 64 lanes per wave before it goes through LDS.
"""

from __future__ import annotations

from tile.backends.cuda._src import lowering as cuda_rules
from tile.ir.ops import Atomic, Copy, Cumsum, Fill, Reduce, register_lowering

TARGET_KIND = "hip"

register_lowering(Copy, target=TARGET_KIND)(cuda_rules.lower_copy_cuda)
register_lowering(Fill, target=TARGET_KIND)(cuda_rules.lower_fill_cuda)
register_lowering(Atomic, target=TARGET_KIND)(cuda_rules.lower_atomic_cuda)
register_lowering(Cumsum, target=TARGET_KIND)(cuda_rules.lower_cumsum_cuda)
register_lowering(Reduce, target=TARGET_KIND)(cuda_rules.lower_reduce_cuda)
