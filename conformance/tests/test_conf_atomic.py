"""T.atomic_add/max/min, region and scalar forms: G blocks fold rows into one output.

N is ``T.dynamic``; the block count G is the dynamic leading dim of the input.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts

ATOMICS = {"add": T.atomic_add, "max": T.atomic_max, "min": T.atomic_min}


def atomic_kernel(kind: str, form: str, bn: int, dtype: str):
    G = T.dynamic("G")
    N = T.dynamic("N")
    atomic = ATOMICS[kind]

    @T.prim_func
    def main(X: T.Tensor((G, N), dtype), Out: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, bn), G, threads=32) as (bx, g):
            tile = T.alloc_fragment((bn,), dtype)
            T.copy(X[g, bx * bn], tile)
            if form == "region":
                atomic(Out[bx * bn], tile)
            else:
                for i in T.serial(bn):
                    if bx * bn + i < N:
                        atomic(Out[bx * bn + i], tile[i])

    return main


@given(kind=st.sampled_from(sorted(ATOMICS)), form=st.sampled_from(["region", "scalar"]),
       bn=st.sampled_from([8, 16]), groups=st.integers(1, 9), n=ts.dims(200),
       seed=st.integers(0, 2**16), data=st.data())
def test_atomics_fold_blocks(tile_backend, kind, form, bn, groups, n, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "int32")), label="dtype")
    kernel = tile_backend.build(atomic_kernel, kind, form, bn, dtype)
    rng = np.random.default_rng(seed)
    x = ref.random_array(rng, (groups, n), dtype)
    out = ref.random_array(rng, (n,), dtype)
    start = out.astype(np.float64)
    kernel(x, out)
    x64 = x.astype(np.float64)
    if kind == "add":
        expected = start + x64.sum(0)
    elif kind == "max":
        expected = np.maximum(start, x64.max(0))
    else:
        expected = np.minimum(start, x64.min(0))
    ref.assert_close(out, expected, dtype, accumulate=groups, magnitude=2.0)


@given(kind=st.sampled_from(["max", "min"]), form=st.sampled_from(["region", "scalar"]),
       dtype=st.sampled_from(["float16", "bfloat16"]), groups=st.integers(1, 9), n=ts.dims(64),
       seed=st.integers(0, 2**16))
def test_16bit_float_max_min_fold_blocks(tile_backend, kind, form, dtype, groups, n, seed) -> None:
    # GPUs have no 16-bit float atomicMax: a CAS on the 32-bit word holding the element,
    # so both halves of a word are hit (n odd and even, neighbours from other blocks)
    if dtype not in tile_backend.capabilities.dtypes:
        pytest.skip(f"the backend declares no {dtype}")
    kernel = tile_backend.build(atomic_kernel, kind, form, 8, dtype)
    rng = np.random.default_rng(seed)
    x = ref.random_array(rng, (groups, n), dtype)
    out = ref.random_array(rng, (n,), dtype)
    start = out.astype(np.float64)
    kernel(x, out)
    fold = np.maximum if kind == "max" else np.minimum
    expected = fold(start, getattr(x.astype(np.float64), kind)(0))
    np.testing.assert_array_equal(out.astype(np.float64), expected)  # a max/min rounds nothing
