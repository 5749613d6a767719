"""Prefix sums in TileLang: ``T.cumsum`` along the rows of each block's tile.

Each block loads a (block_M, N) tile into shared memory, scans it in place along
dim 1, and writes it back; a second output holds the reverse (suffix) sums, computed
into a fragment. M is not a multiple of the block, so the last tile is predicated.

Run: python examples/cumsum.py
"""

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T


@tilelang.jit(out_idx=[1, 2])
def row_cumsum(M, N, block_M=32, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Prefix: T.Tensor((M, N), dtype), Suffix: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            suffix = T.alloc_fragment((block_M, N), dtype)

            T.copy(X[bx * block_M, 0], tile)
            T.cumsum(tile, suffix, dim=1, reverse=True)
            T.cumsum(tile, dim=1)
            T.copy(tile, Prefix[bx * block_M, 0])
            T.copy(suffix, Suffix[bx * block_M, 0])

    return main


if __name__ == "__main__":
    M, N = 100, 64
    x = np.random.default_rng(0).standard_normal((M, N)).astype("float32")
    prefix, suffix = row_cumsum(M, N)(x)
    np.testing.assert_allclose(prefix, np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(suffix, np.flip(np.cumsum(np.flip(x, 1), axis=1), 1), rtol=1e-5, atol=1e-5)
    print("cumsum: OK")
