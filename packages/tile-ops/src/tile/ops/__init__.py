"""tile.ops: operators written in tile.lang (``tile.ops.elementwise``, ``tile.ops.gemm``)."""
