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
from tile.testsupport.kernels import split_k_gemm
from tile.testsupport.markers import needs_backend

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


def test_return_prev_updates_even_when_the_old_value_is_dropped():
    # a thread-level atomic (the emulator's in test_lang_compat_issue19.py); on the CPU the plain
    # update of lower_host_atomics (test_lang_thread_atomics_cpu.py)
    @T.prim_func
    def prev(C: T.Tensor((4,), "float32")):
        with T.Kernel(3, threads=32) as _bx:
            T.atomic_add(C[0], 1.0, return_prev=True)

    c = np.array([2.0, 0.0, 0.0, 0.0], "float32")
    tilelang.compile(prev, target="cpu")(c)
    np.testing.assert_array_equal(c, [5.0, 0.0, 0.0, 0.0])


@T.prim_func
def _fetch_wide(
    H: T.Tensor((2,), "float16"),
    VH: T.Tensor((4, 2), "float16"),
    OldH: T.Tensor((4, 2), "float16"),
    F: T.Tensor((4,), "float32"),
    VF: T.Tensor((4, 4), "float32"),
    OldF: T.Tensor((4, 4), "float32"),
    E: T.Tensor((2,), "float32"),
    OldE: T.Tensor((4, 2), "float32"),
    Z: T.Tensor((1,), "float32"),
    G: T.Tensor((4, 8), "float32"),
):
    with T.Kernel(1, threads=4):
        for i in T.Parallel(4):  # four threads, each fetching from the same elements
            OldH[i, 0:2] = T.atomic_addx2(H[0:2], VH[i, 0:2], return_prev=True)
            OldF[i, 0:4] = T.atomic_addx4(F[T.Ramp(0, 1, 4)], VF[i, 0], return_prev=True)
            OldE[i, 0] = T.atomic_max(E[0], T.cast(i, "float32"), return_prev=True)
            OldE[i, 1] = T.atomic_min(E[1], -T.cast(i, "float32"), return_prev=True)
        T.clear(Z)  # one element: one thread's store, or a late one would undo the adds below
        T.atomic_add(Z, 1.0)  # TileLang's scalar into a whole tile, once per block
        T.atomic_add(Z, 2.0)
        T.atomic_max(G[0:2, 2:6], 0.5)


@needs_backend("cuda")
def test_fetching_atomics_and_scalar_tile_atomics_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")  # an uncached nvcc check costs ~15 s
    kernel = tilelang.compile(_fetch_wide, target={"kind": "cuda", "arch": "sm_80"})
    h, vh, old_h = np.zeros(2, "float16"), np.tile(np.float16([1, 2]), (4, 1)), np.zeros((4, 2), "float16")
    f, vf, old_f = np.float32([10, 20, 30, 40]), np.ones((4, 4), "float32"), np.zeros((4, 4), "float32")
    e, old_e = np.zeros(2, "float32"), np.full((4, 2), 9.0, "float32")
    z, g = np.full(1, 7.0, "float32"), np.zeros((4, 8), "float32")
    kernel(h, vh, old_h, f, vf, old_f, e, old_e, z, g)
    # each element saw the four adds one at a time: its old values are the partial sums
    assert h.tolist() == [4, 8] and f.tolist() == [14, 24, 34, 44]
    assert sorted(old_h[:, 0].tolist()) == [0, 1, 2, 3] and sorted(old_h[:, 1].tolist()) == [0, 2, 4, 6]
    for lane in range(4):
        assert sorted(old_f[:, lane].tolist()) == [10 * (lane + 1) + k for k in range(4)]
    assert e.tolist() == [3.0, -3.0]
    assert 0.0 in old_e[:, 0] and set(old_e[:, 0].tolist()) <= {0.0, 1.0, 2.0}
    assert 0.0 in old_e[:, 1] and set(old_e[:, 1].tolist()) <= {0.0, -1.0, -2.0}
    assert z[0] == 3.0
    expected_g = np.zeros((4, 8), "float32")
    expected_g[0:2, 2:6] = 0.5
    np.testing.assert_array_equal(g, expected_g)


def test_scalar_into_a_tile_and_a_wide_fetch_on_the_cpu():
    @T.prim_func
    def shifted(A: T.Tensor((6, 8), "float32")):
        with T.Kernel(3, threads=32) as bx:
            T.atomic_add(A[bx * 2 : bx * 2 + 2, 0:8], 1.5)  # every block adds to its own rows
            T.atomic_min(A[0:6, 7:8], -1.0)  # every block lowers the last column

    kernel = tilelang.compile(shifted, target="cpu")
    a = np.arange(48, dtype="float32").reshape(6, 8)
    expected = a + 1.5
    expected[:, 7] = -1.0
    kernel(a)
    np.testing.assert_array_equal(a, expected)

    @T.prim_func
    def wide_fetch(A: T.Tensor((4,), "float32"), Old: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            Old[0:2] = T.atomic_addx2(A[0:2], A[2:4], return_prev=True)

    a = np.array([1.0, 2.0, 30.0, 40.0], "float32")
    old = np.zeros(4, "float32")
    tilelang.compile(wide_fetch, target="cpu")(a, old)
    np.testing.assert_array_equal(old, [1.0, 2.0, 0.0, 0.0])
    np.testing.assert_array_equal(a, [31.0, 42.0, 30.0, 40.0])


@T.prim_func
def _wide_integers_and_halves(
    L: T.Tensor((2,), "int64"), U: T.Tensor((2,), "uint64"), H: T.Tensor((2,), "float16")
):
    with T.Kernel(1, threads=64):
        for _i in T.Parallel(64):
            T.atomic_add(L[0], T.int64(1) << 40)  # beyond 32 bits
            T.atomic_add(U[1], T.uint64(3))
            T.atomic_add(H[1], T.float16(0.5))  # the other half of H[0]'s 32-bit word


@pytest.mark.parametrize(
    "target",
    [
        pytest.param({"kind": "cuda", "arch": "sm_80"}, marks=needs_backend("cuda"), id="cuda-emu"),
        pytest.param({"kind": "hip", "arch": "gfx90a"}, marks=needs_backend("rocm"), id="rocm-emu"),
    ],
)
def test_64_bit_and_16_bit_atomic_adds_on_the_emulators(monkeypatch, target):
    # the generated code spells them int64_t / uint64_t / half, which tile::atomic_add did not take
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    kernel = tilelang.compile(_wide_integers_and_halves, target=target)
    low, unsigned, halves = np.array([5, 6], "int64"), np.array([1, 2], "uint64"), np.float16([1.0, 2.0])
    kernel(low, unsigned, halves)
    assert low.tolist() == [5 + 64 * 2**40, 6] and unsigned.tolist() == [1, 2 + 64 * 3]
    assert halves.tolist() == [1.0, 2.0 + 64 * 0.5]
