"""T.atomic_add/max/min: split-K GEMM and many blocks contending for the same elements.

On the CPU the blocks of a kernel normally run in parallel on the cores; a kernel whose
atomics update global memory runs its blocks one after another (the LLVM code
generator has no atomic read-modify-write), so these results are exact on every run.
The contrast with a plain ``+=`` kernel is checked in the generated code, which is
deterministic, rather than by provoking a race.
"""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.testsupport.kernels import split_k_gemm

RUNS = 3


@pytest.mark.parametrize(
    "M,N,K,split",
    [(64, 64, 128, 1), (64, 64, 128, 4), (50, 37, 70, 3), (33, 20, 100, 7)],
)
def test_split_k_gemm_matches_numpy(M, N, K, split):
    kernel = tilelang.compile(split_k_gemm(M, N, K, 16, 16, 16, split, "float32"), target="cpu")
    rng = np.random.default_rng(K + split)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    for _ in range(RUNS):
        c = np.zeros((M, N), "float32")
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_split_k_gemm_fp16_inputs_with_a_slice_destination():
    M, N, K, bm, bn, bk, split = 32, 32, 64, 16, 16, 16, 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, split, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(K // split // bk):
                T.copy(A[by * bm, bz * (K // split) + ko * bk], A_s)
                T.copy(B[bz * (K // split) + ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.atomic_add(C[by * bm : (by + 1) * bm, bx * bn : (bx + 1) * bn], C_l)

    kernel = tilelang.compile(main, target="cpu")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    c = np.zeros((M, N), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)


def global_row_extreme(R, Ncols, bn, kind, form):
    """Every column block folds its tile's row extremes into the same R outputs."""
    reduce = T.reduce_max if kind == "max" else T.reduce_min
    atomic = T.atomic_max if kind == "max" else T.atomic_min

    @T.prim_func
    def main(X: T.Tensor((R, Ncols), "float32"), Out: T.Tensor((R,), "float32")):
        with T.Kernel(T.ceildiv(Ncols, bn), threads=64) as bx:
            tile = T.alloc_fragment((R, bn), "float32")
            part = T.alloc_fragment((R,), "float32")
            T.fill(tile, X[0, 0])  # tail columns repeat a real element, never a fake extreme
            T.copy(X[0, bx * bn], tile)
            reduce(tile, part, dim=1)
            if form == "region":
                atomic(Out[0], part)
            else:
                for i in T.Parallel(R):
                    atomic(Out[i], part[i])

    return main


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("form", ["region", "scalar"])
def test_atomic_max_min_with_many_contending_blocks(kind, form):
    R, Ncols, bn = 8, 16 * 37 + 5, 16  # 38 blocks update the same 8 elements
    kernel = tilelang.compile(global_row_extreme(R, Ncols, bn, kind, form), target="cpu")
    rng = np.random.default_rng(7)
    for _ in range(RUNS):
        x = rng.standard_normal((R, Ncols)).astype("float32")
        start = np.full(R, -np.inf if kind == "max" else np.inf, "float32")
        out = start.copy()
        kernel(x, out)
        np.testing.assert_array_equal(out, x.max(1) if kind == "max" else x.min(1))


def test_scalar_atomic_add_histogram_with_colliding_lanes():
    """Lanes of one T.Parallel loop and different blocks hit the same bins."""
    n, bins, bn = 1000, 5, 32

    @T.prim_func
    def hist(Idx: T.Tensor((n,), "int32"), W: T.Tensor((n,), "float32"), H: T.Tensor((bins,), "float32")):
        with T.Kernel(T.ceildiv(n, bn), threads=32) as bx:
            for i in T.Parallel(bn):
                if bx * bn + i < n:
                    T.atomic_add(H[Idx[bx * bn + i]], W[bx * bn + i])

    kernel = tilelang.compile(hist, target="cpu")
    rng = np.random.default_rng(5)
    idx = rng.integers(0, bins, n).astype("int32")
    w = rng.integers(1, 4, n).astype("float32")
    for _ in range(RUNS):
        h = np.zeros(bins, "float32")
        kernel(idx, w, h)
        np.testing.assert_array_equal(h, np.bincount(idx, weights=w, minlength=bins).astype("float32"))


def test_block_local_atomics_keep_blocks_parallel():
    """Atomics on shared memory race with no other block: the grid stays a parallel loop."""
    n, bn = 256, 64

    @T.prim_func
    def count(Idx: T.Tensor((n,), "int32"), Out: T.Tensor((n // bn, 4), "int32")):
        with T.Kernel(n // bn, threads=64) as bx:
            local_hist = T.alloc_shared((4,), "int32")
            T.clear(local_hist)
            for i in T.Parallel(bn):
                T.atomic_add(local_hist[Idx[bx * bn + i]], 1)
            T.copy(local_hist, Out[bx, 0])

    kernel = tilelang.compile(count, out_idx=[-1], target="cpu")
    idx = np.random.default_rng(2).integers(0, 4, n).astype("int32")
    ref = np.stack([np.bincount(idx[b * bn : (b + 1) * bn], minlength=4) for b in range(n // bn)])
    np.testing.assert_array_equal(kernel(idx), ref)
    assert "for block in T.parallel(" in kernel.get_kernel_source()


def test_global_atomics_serialize_the_grid_where_plain_updates_do_not():
    n = 64

    def kernel_of(use_atomic):
        @T.prim_func
        def total(X: T.Tensor((n,), "float32"), S: T.Tensor((1,), "float32")):
            with T.Kernel(n // 16, threads=16) as bx:
                for i in T.serial(16):
                    if use_atomic:
                        T.atomic_add(S[0], X[bx * 16 + i])
                    else:
                        S[0] = S[0] + X[bx * 16 + i]

        return tilelang.compile(total, target="cpu")

    atomic, plain = kernel_of(True), kernel_of(False)
    assert "for block in T.parallel(" not in atomic.get_kernel_source()
    assert "for block in T.parallel(" in plain.get_kernel_source()  # its blocks race
    x = np.arange(n, dtype="float32")
    s = np.zeros(1, "float32")
    atomic(x, s)
    assert s[0] == x.sum()


def test_return_prev_is_rejected_rather_than_ignored():
    # a GPU thread-level atomic (tested on the emulator in test_lang_compat_issue19.py); the CPU
    # backend refuses it
    @T.prim_func
    def prev(C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            T.atomic_add(C[0], 1.0, return_prev=True)

    with pytest.raises(UnsupportedOnTargetError, match="return_prev"):
        tilelang.compile(prev, target="cpu")
