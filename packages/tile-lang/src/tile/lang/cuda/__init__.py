"""``tile.lang.cuda`` (TileLang's ``tilelang.cuda``): CUDA-flavoured helpers of the expert tier.

Only ``intrinsics`` is here; the CUDA backend itself is the ``tile.backends.cuda`` plug-in.
"""

from . import intrinsics as intrinsics
