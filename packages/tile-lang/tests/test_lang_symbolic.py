"""Symbolic dims (T.dynamic / T.symbolic): one compiled kernel, many shapes."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang import KernelArgumentError
from tile.lang.demo import matmul as paper_gemm
from tile.lang.errors import TileTypeError


def gemm_symbolic_m(N, K, bm=16, bn=16, bk=16):
    """The paper's GEMM with M a ``T.dynamic`` dim."""
    return paper_gemm(T.dynamic("M"), N, K, bm, bn, bk, "float32", "float32", num_stages=2)


def test_gemm_with_symbolic_m_compiled_once_runs_three_sizes():
    kernel = tilelang.compile(gemm_symbolic_m(N=40, K=24), out_idx=[-1], target="cpu")
    rng = np.random.default_rng(0)
    b = rng.standard_normal((24, 40)).astype("float32")
    for m in (1, 77, 300):
        a = rng.standard_normal((m, 24)).astype("float32")
        c = kernel(a, b)
        assert c.shape == (m, 40)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_symbolic_innermost_dim_tail_and_derived_output_shape():
    N = T.symbolic("N")

    @T.prim_func
    def double_and_halve(A: T.Tensor((N,), "float32"), B: T.Tensor((N * 2,), "float32")):
        with T.Kernel(T.ceildiv(N, 32), threads=128) as bx:
            tile = T.alloc_fragment((32,), "float32")
            T.copy(A[bx * 32], tile)
            for i in T.Parallel(32):
                tile[i] = tile[i] * 3.0
            T.copy(tile, B[bx * 32])

    kernel = tilelang.compile(double_and_halve, out_idx=[1], target="cpu")
    for n in (5, 33, 64):
        a = np.arange(n, dtype="float32")
        b = kernel(a)
        assert b.shape == (2 * n,)
        np.testing.assert_allclose(b[:n], 3 * a)


def test_symbolic_dims_must_agree_between_arguments():
    kernel = tilelang.compile(gemm_symbolic_m(N=16, K=16), out_idx=[-1], target="cpu")
    a = np.zeros((8, 16), "float32")
    with pytest.raises(KernelArgumentError, match="shape"):
        kernel(a, np.zeros((15, 16), "float32"))


def test_dynamic_rejects_bad_names():
    with pytest.raises(TileTypeError, match="identifier"):
        T.dynamic("not a name")
    with pytest.raises(TileTypeError, match="identifier"):
        T.dynamic("S, 2B")


def test_dynamic_declares_several_dims_at_once():
    # TileLang's DSA kernels: seq_len, batch_plus_one = T.dynamic("seq_len, batch_plus_one")
    s, b = T.dynamic("S, B_plus_one")
    assert (s.name, b.name) == ("S", "B_plus_one") and str(s.ty) == str(b.ty) == "int32"

    @T.prim_func
    def offsets(X: T.Tensor((s, 4), "float32"), Off: T.Tensor((b,), "int32"), Y: T.Tensor((s, 4), "float32")):
        with T.Kernel(s, threads=1) as row:
            for j in T.serial(4):
                Y[row, j] = X[row, j] + T.Cast("float32", Off[b - 1])

    kernel = tilelang.compile(offsets, target="cpu")
    for rows, count in ((3, 2), (5, 4)):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        o = np.arange(count, dtype=np.int32) * 10
        y = np.zeros_like(x)
        kernel(x, o, y)
        np.testing.assert_array_equal(y, x + o[-1])
    with pytest.raises(TileTypeError, match="integer"):
        T.dynamic("M", "float32")
