"""``tile.lang.contrib`` (TileLang's ``tilelang.contrib``): only ``nvcc``'s compute-version
helpers, which TileLang's examples call to check the GPU they compile for."""

from . import nvcc as nvcc
