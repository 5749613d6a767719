"""The SIMT lowering rules for the ``hip`` target kind.

The GPU layer's rules for ``T.copy``, ``T.fill``, ``T.reduce_*``, ``T.atomic_*`` and
``T.cumsum`` (:mod:`tile.ir.gpu.simt_lowering`) read everything target-specific from the
capabilities (warp size, vector width) and emit only calls into the device header's
``tile::`` names (``tile::shfl_xor``, ``tile::atomic_add``, ...), which ``tile_hip.h``
implements for wave64. So they are registered for ``hip`` as they are: a reduction's xor
butterfly then spans 64 lanes per wave before it goes through LDS.
"""

from __future__ import annotations

from tile.ir.gpu import register_simt_lowerings

TARGET_KIND = "hip"

register_simt_lowerings(TARGET_KIND)
