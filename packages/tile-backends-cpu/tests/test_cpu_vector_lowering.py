"""CPU vector lowerings of memory-bound tile programs, against numpy.

Reductions along the last dim use vector partial accumulators (``reduce_lowering.py``);
long ``T.Parallel`` loops are strip-mined into full-width vector chunks plus a
vectorized tail (``vectorize_parallel_loops``). Sizes cover chunk multiples, tails,
short rows (the generic rule) and odd row counts.
"""

import re

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T

REDUCERS = {
    "sum": (T.reduce_sum, lambda x: x.sum(-1)),
    "max": (T.reduce_max, lambda x: x.max(-1)),
    "min": (T.reduce_min, lambda x: x.min(-1)),
    "abssum": (T.reduce_abssum, lambda x: np.abs(x).sum(-1)),
    "absmax": (T.reduce_absmax, lambda x: np.abs(x).max(-1)),
}


def reduce_kernel(M: int, N: int, kind: str, clear: bool, block_M: int = 4, dtype: str = "float32"):
    reducer = REDUCERS[kind][0]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            y = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.copy(Y[bx * block_M], y)
            reducer(x, y, dim=1, clear=clear)
            T.copy(y, Y[bx * block_M])

    return main


def vector_widths(llvm: str, elem: str = "float") -> set[int]:
    return {int(n) for n in re.findall(rf"<(\d+) x {elem}>", llvm)}


@pytest.mark.parametrize("kind", sorted(REDUCERS))
@pytest.mark.parametrize(("M", "N"), [(8, 256), (5, 200), (3, 17), (4, 9)])
def test_row_reductions_match_numpy(kind: str, M: int, N: int):
    rng = np.random.default_rng(M * N)
    x = rng.standard_normal((M, N)).astype(np.float32)
    init = rng.standard_normal(M).astype(np.float32)
    expect_folded = {
        "sum": init + x.sum(-1),
        "abssum": init + np.abs(x).sum(-1),
        "max": np.maximum(init, x.max(-1)),
        "absmax": np.maximum(init, np.abs(x).max(-1)),
        "min": np.minimum(init, x.min(-1)),
    }[kind]
    for clear, want in ((True, REDUCERS[kind][1](x)), (False, expect_folded)):
        kernel = tilelang.compile(reduce_kernel(M, N, kind, clear), target="cpu")
        y = init.copy()
        kernel(x, y)
        if kind in ("max", "min", "absmax"):
            np.testing.assert_array_equal(y, want.astype(np.float32))  # exact in any order
        else:
            np.testing.assert_allclose(y, want, rtol=2e-6 * np.sqrt(N), atol=1e-6 * N)


def test_max_of_minus_inf_rows_is_minus_inf_and_int_reductions_are_exact():
    M, N = 4, 300
    x = np.full((M, N), -np.inf, np.float32)
    x[1, 299] = 3.0  # in the tail
    x[2, 5] = np.float32(-1e38)
    kernel = tilelang.compile(reduce_kernel(M, N, "max", True), target="cpu")
    y = np.zeros(M, np.float32)
    kernel(x, y)
    np.testing.assert_array_equal(y, np.array([-np.inf, 3.0, -1e38, -np.inf], np.float32))
    xi = np.random.default_rng(0).integers(-1000, 1000, (M, N)).astype(np.int32)
    kernel = tilelang.compile(reduce_kernel(M, N, "sum", True, dtype="int32"), target="cpu")
    yi = np.zeros(M, np.int32)
    kernel(xi, yi)
    np.testing.assert_array_equal(yi, xi.sum(-1))


def test_row_reduction_uses_full_width_vectors():
    kernel = tilelang.compile(reduce_kernel(16, 4096, "sum", True), target="cpu")
    tir = kernel.get_kernel_source("tir")
    assert "T.vectorized(64)" in tir
    assert max(vector_widths(kernel.get_kernel_source("llvm"))) >= 16


def scale_rows_kernel(M: int, N: int, block_M: int = 2):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(S[bx * block_M], s)
            for i, j in T.Parallel(block_M, N):
                t = x[i, j] * s[i]  # a per-iteration local
                x[i, j] = T.exp(t) + t
            T.copy(x, Y[bx * block_M, 0])

    return main


@pytest.mark.parametrize(("M", "N"), [(4, 4096), (3, 1000), (5, 65), (2, 63)])
def test_long_parallel_loops_are_strip_mined_with_a_vector_tail(M: int, N: int):
    kernel = tilelang.compile(scale_rows_kernel(M, N), out_idx=[-1], target="cpu")
    tir = kernel.get_kernel_source("tir")
    assert "T.vectorized(64)" in tir or N < 64
    if N % 64 > 1 and N > 64:
        assert f"T.vectorized({N % 64})" in tir
    rng = np.random.default_rng(N)
    x = rng.standard_normal((M, N)).astype(np.float32)
    s = rng.uniform(0.5, 2.0, M).astype(np.float32)
    t = (x * s[:, None]).astype(np.float64)
    np.testing.assert_allclose(kernel(x, s), np.exp(t) + t, rtol=2e-6, atol=1e-6)
    assert max(vector_widths(kernel.get_kernel_source("llvm"))) >= 16
