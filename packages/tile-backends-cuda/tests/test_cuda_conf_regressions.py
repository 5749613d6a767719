"""Conformance failures of the CUDA backend, reduced to kernels run under the CPU emulator.

Each test is a bug the conformance suite found under ``--tile-backend=cuda
--tile-device=emu``; the kernels run the generated CUDA source (TILE_DEVICE=emu)
and are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
SM80 = {"kind": "cuda", "arch": "sm_80"}


def scalar_atomic_kernel(n: int, bn: int):
    """Serial loop over a fragment of ``bn`` elements on 32 threads: only ``bn`` threads own one."""

    @T.prim_func
    def main(X: T.Tensor((4, n), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, bn), 4, threads=32) as (bx, g):
            tile = T.alloc_fragment((bn,), "float32")
            T.copy(X[g, bx * bn], tile)
            for i in T.serial(bn):
                if bx * bn + i < n:
                    T.atomic_add(Out[bx * bn + i], tile[i])

    return main


def test_cuda_conf_scalar_atomic_from_a_fragment_runs_once_on_the_owner():
    n, bn = 40, 8
    kernel = tilelang.compile(scalar_atomic_kernel(n, bn), target=SM80)
    rng = np.random.default_rng(7)
    x = rng.integers(-8, 8, (4, n)).astype(np.float32)
    out = rng.integers(-8, 8, n).astype(np.float32)
    want = out + x.sum(0)
    kernel(x, out)
    np.testing.assert_array_equal(out, want)


def serial_store_of_row_sums(m: int, n: int):
    """Row sums (replicated over the threads of a row) stored element by element in a serial loop."""

    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), Out: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((m, n), "float32")
            s = T.alloc_fragment((m,), "float32")
            T.copy(X[0, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i in T.serial(m):
                Out[i] = s[i] * 2.0 + Out[i]

    return main


def test_cuda_conf_serial_store_reads_a_replicated_fragment_on_its_owner():
    m, n = 16, 64
    kernel = tilelang.compile(serial_store_of_row_sums(m, n), target=SM80)
    rng = np.random.default_rng(8)
    x = rng.integers(-4, 4, (m, n)).astype(np.float32)
    out = rng.integers(-4, 4, m).astype(np.float32)
    want = out + 2 * x.sum(1)
    kernel(x, out)
    np.testing.assert_array_equal(out, want)


def block_swizzled_transpose(bm: int, bn: int):
    """Dynamic M and N with T.use_swizzle: the remap reads the grid width ceildiv(N, bn)."""
    M = T.dynamic("M")
    N = T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((N, M), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), "float16")
            Yt = T.alloc_fragment((bn, bm), "float16")
            T.use_swizzle(4)
            T.copy(X[by * bm, bx * bn], S)
            for j, i in T.Parallel(bn, bm):
                Yt[j, i] = S[i, j]
            T.copy(Yt, Y[bx * bn, by * bm])

    return main


def test_cuda_conf_block_swizzle_grid_width_is_no_kernel_parameter():
    kernel = tilelang.compile(block_swizzled_transpose(16, 32), out_idx=[-1], target=SM80)
    source = kernel.get_kernel_source("cuda")
    signature = source[source.index("main_kernel(") : source.index(")", source.index("main_kernel("))]
    assert "cse_v" not in signature
    rng = np.random.default_rng(9)
    for m, n in [(37, 70), (100, 33)]:
        x = rng.standard_normal((m, n)).astype(np.float16)
        np.testing.assert_array_equal(kernel(x), x.T)


def fragment_operand_gemm(n: int, k: int):
    """Both operands in fragments, no T.clear: one mma per k-step and nothing else in the rule."""

    @T.prim_func
    def main(
        A: T.Tensor((16, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((16, n), "float32")
    ):
        with T.Kernel(T.ceildiv(n, 8), threads=32) as bx:
            A_f = T.alloc_fragment((16, 16), "float16")
            B_f = T.alloc_fragment((16, 8), "float16")
            C_f = T.alloc_fragment((16, 8), "float32")
            T.copy(C[0, bx * 8], C_f)
            for kb in T.serial(k // 16):
                T.copy(A[0, kb * 16], A_f)
                T.copy(B[kb * 16, bx * 8], B_f)
                T.gemm(A_f, B_f, C_f)
            T.copy(C_f, C[0, bx * 8])

    return main


def test_cuda_conf_gemm_of_fragments_with_one_mma_per_k_step():
    n, k = 24, 32
    kernel = tilelang.compile(fragment_operand_gemm(n, k), target=SM80)
    rng = np.random.default_rng(10)
    a = rng.integers(-3, 4, (16, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    c = rng.integers(-3, 4, (16, n)).astype(np.float32)
    want = c + a.astype(np.float32) @ b.astype(np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, want)


def odd_tile_reduce_kernel(rows: int, cols: int, dim: int, scope: str):
    """``Y = Old + sum(X tile, dim)`` on a tile whose shape does not divide 32 threads."""
    out = cols if dim == 0 else rows
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(X: T.Tensor((3, rows, cols), "float32"), Old: T.Tensor((3, out), "float32"),
             Y: T.Tensor((3, out), "float32")):
        with T.Kernel(3, threads=32) as bx:
            src = alloc((rows, cols), "float32")
            dst = T.alloc_fragment((out,), "float32")
            T.copy(X[bx, 0:rows, 0:cols], src)
            T.copy(Old[bx, 0:out], dst)
            T.reduce_sum(src, dst, dim=dim, clear=False)
            T.copy(dst, Y[bx, 0:out])

    return main


@pytest.mark.parametrize("scope", ["fragment", "shared"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("shape", [(7, 5), (16, 3)])
def test_reduce_of_a_tile_that_does_not_divide_the_threads(shape, dim, scope):
    # The default binding of a 7 x 5 tile left holes among 32 threads (not invertible, and
    # a row's owners were no shuffle group); now its rows go to 7 threads whole, and the
    # reduction guards the 25 threads that hold nothing (they added poison before).
    kernel = tilelang.compile(odd_tile_reduce_kernel(*shape, dim, scope), out_idx=[-1], target=SM80)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, *shape)).astype(np.float32)
    old = rng.standard_normal((3, shape[1 - dim])).astype(np.float32)
    np.testing.assert_allclose(kernel(x, old), old + x.sum(axis=1 + dim), rtol=1e-5, atol=1e-5)


def small_gemm_kernel(M: int, N: int, K: int, bk: int, stages: int, b_in_registers: bool):
    """``C = A @ B`` in 16x16 tiles on 4 warps (no m16n8 split over 4 warps exists); with
    ``b_in_registers`` B is read into a fragment as (N, K) and used transposed."""
    b_alloc = T.alloc_fragment if b_in_registers else T.alloc_shared
    b_tile = (16, bk) if b_in_registers else (bk, 16)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K) if b_in_registers else (K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16), threads=128) as (bx, by):
            A_s = T.alloc_shared((16, bk), "float16")
            B_t = b_alloc(b_tile, "float16")
            C_f = T.alloc_fragment((16, 16), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * 16, k * bk], A_s)
                if b_in_registers:
                    T.copy(B[bx * 16, k * bk], B_t)
                else:
                    T.copy(B[k * bk, bx * 16], B_t)
                T.gemm(A_s, B_t, C_f, transpose_B=b_in_registers)
            T.copy(C_f, C[by * 16, bx * 16])

    return main


@pytest.mark.parametrize(
    ("mnk", "bk", "stages", "b_in_registers"),
    [((16, 16, 64), 16, 2, False), ((5, 31, 13), 8, 3, False), ((37, 24, 16), 16, 1, True)],
    ids=["16x16-on-4-warps", "2-steps-3-stages", "transposed-fragment-B"],
)
def test_gemms_without_an_mma_tiling_fall_back_per_thread(mnk, bk, stages, b_in_registers):
    # Each raised UnsupportedOnTargetError (or failed in codegen: a 3-stage ring over 2
    # steps) before; now the accumulator elements are computed per thread
    M, N, K = mnk
    func = small_gemm_kernel(M, N, K, bk, stages, b_in_registers)
    kernel = tilelang.compile(func, out_idx=[-1], target=SM80)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if b_in_registers else (K, N)).astype(np.float16)
    want = a.astype(np.float64) @ (b.T if b_in_registers else b).astype(np.float64)
    np.testing.assert_allclose(kernel(a, b), want, rtol=1e-4, atol=1e-4)


def transposed_register_a_kernel(M: int, N: int, K: int):
    """A transposed A tile (8 x 32) in registers over 128 threads: a replicated fragment."""

    @T.prim_func
    def main(A: T.Tensor((K, M), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 32), threads=128) as (bx, by):
            A_t = T.alloc_fragment((8, 32), "float32")
            B_s = T.alloc_shared((8, 16), "float32")
            C_f = T.alloc_fragment((32, 16), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 8), num_stages=1):
                T.copy(A[k * 8, by * 32], A_t)
                T.copy(B[k * 8, bx * 16], B_s)
                T.gemm(A_t, B_s, C_f, transpose_A=True)
            T.copy(C_f, C[by * 32, bx * 16])

    return main


def test_gemm_stages_a_replicated_register_operand_once():
    # The conformance gemm_epilogue family drew this tiling: the 8x32 operand on 128 threads
    # is held by several threads per element, and staging it for the per-thread gemm raised
    # UnsupportedOnTargetError; now each element's replica-0 owner stores it
    M, N, K = 37, 24, 24
    kernel = tilelang.compile(transposed_register_a_kernel(M, N, K), out_idx=[-1], target=SM80)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((K, M)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
