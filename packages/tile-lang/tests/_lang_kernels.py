"""Kernels that several tile-lang test modules build alike (a helper, not a test module)."""

import pytest

import tile.lang.language as T

# The CPU backend and the CUDA emulator as sm_80 and sm_90a (tests set TILE_DEVICE=emu).
EMU_TARGETS = [
    "cpu",
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80-emu"),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a-emu"),
]


def row_scale(M, N, factor, dtype="float32", rows=4):
    """``B = A * factor`` for (M, N) tensors, ``rows`` rows of A per block (M may be symbolic)."""

    @T.prim_func
    def scale(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, rows), threads=128) as bx:
            tile = T.alloc_fragment((rows, N), dtype)
            T.copy(A[bx * rows, 0], tile)
            for i, j in T.Parallel(rows, N):
                tile[i, j] = tile[i, j] * factor
            T.copy(tile, B[bx * rows, 0])

    return scale
