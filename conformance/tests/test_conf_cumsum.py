"""T.cumsum on shared and fragment tiles, each dim, forward and reverse, in place or not."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts

TILES = ((4, 8), (7, 5), (1, 13), (16, 2))

DTYPES = ("float32", "int32", "float16")


def cumsum_kernel(tile: tuple[int, int], dim: int, reverse: bool, in_place: bool, dtype: str, scope: str):
    B = T.dynamic("B")
    R, C = tile
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(X: T.Tensor((B, R, C), dtype), Y: T.Tensor((B, R, C), dtype)):
        with T.Kernel(B, threads=32) as bx:
            S = alloc((R, C), dtype)
            T.copy(X[bx, 0:R, 0:C], S)
            if in_place:
                T.cumsum(S, dim=dim, reverse=reverse)
                T.copy(S, Y[bx, 0:R, 0:C])
            else:
                D = T.alloc_fragment((R, C), dtype)
                T.cumsum(S, D, dim=dim, reverse=reverse)
                T.copy(D, Y[bx, 0:R, 0:C])

    return main


@given(tile=st.sampled_from(TILES), dim=st.sampled_from([0, 1, -1]), reverse=st.booleans(),
       in_place=st.booleans(), scope=st.sampled_from(["shared", "fragment"]), batch=st.integers(1, 7),
       seed=st.integers(0, 2**16), data=st.data())
def test_cumsum(tile_backend, tile, dim, reverse, in_place, scope, batch, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, DTYPES), label="dtype")
    kernel = tile_backend.build(cumsum_kernel, tile, dim, reverse, in_place, dtype, scope, out_idx=(-1,))
    x = ref.random_array(np.random.default_rng(seed), (batch, *tile), dtype)
    out = kernel(x)
    expected = ref.cumsum(x.astype(np.float64), 1 + dim % 2, reverse)
    ref.assert_close(out, expected, dtype, accumulate=max(tile), magnitude=2.0, accum_dtype=dtype)
