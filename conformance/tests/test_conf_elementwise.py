"""Copy chains with casts and T.Parallel expressions, over random shapes and blocks.

Every example compiles a kernel for the backend under test and checks it against numpy,
including shapes that are primes or not multiples of the block (tail predicates).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts


def scale_shift_kernel(M: int, N: int, bm: int, bn: int, in_dtype: str, out_dtype: str):
    @T.prim_func
    def main(A: T.Tensor((M, N), in_dtype), B: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bn), in_dtype)
            A_frag = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], A_shared)
            T.copy(A_shared, A_frag)
            for i, j in T.Parallel(bm, bn):
                A_frag[i, j] = A_frag[i, j] * 2.0 + 1.0
            T.copy(A_frag, B[by * bm, bx * bn])

    return main


FLOATS = ("float32", "float16", "float64")


@given(shape=ts.shapes_2d(), block=ts.blocks_2d((8, 16, 32, 64)), data=st.data())
def test_copy_chain_with_casts_and_parallel(tile_backend, shape, block, data) -> None:
    in_dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, FLOATS), label="in_dtype")
    out_dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, FLOATS), label="out_dtype")
    M, N = shape
    kernel = tile_backend.compile(scale_shift_kernel(M, N, *block, in_dtype, out_dtype), out_idx=[-1])
    a = ref.random_array(np.random.default_rng(M * 1000 + N), (M, N), in_dtype)
    out = kernel(a)
    expected = a.astype(np.float64) * 2.0 + 1.0
    ref.assert_close(out, expected, in_dtype, out_dtype, "float32")
    assert out.dtype == np.dtype(out_dtype)
