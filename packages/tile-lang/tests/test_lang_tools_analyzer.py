"""``tile.lang.tools.Analyzer``: FLOPs and global bytes of a tile program, against hand counts.

TileLang's examples/analyze print ``Analyzer.analysis(kernel.get_tir(...), CUDA("cuda"))``
for a GEMM and an im2col convolution and compare the FLOPs with ``2 * M * N * K``.
"""

from __future__ import annotations

import types

import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.carver.arch import CUDA
from tile.lang.tools import AnalysisError, AnalysisResult, Analyzer

M, N, K = 256, 384, 512


def gemm(block_m: int, block_n: int, block_k: int):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_m, block_k), "float16")
            B_s = T.alloc_shared((block_n, block_k), "float16")
            acc = T.alloc_fragment((block_m, block_n), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=3):
                T.copy(A[by * block_m, k * block_k], A_s)
                T.copy(B[bx * block_n, k * block_k], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_m, bx * block_n])

    return main


@pytest.mark.parametrize(("bm", "bn", "bk"), [(128, 128, 32), (64, 128, 64), (256, 128, 32)])
def test_a_gemm_counts_2mnk_and_each_tile_read_once_per_block(bm, bn, bk):
    result = Analyzer.analysis(gemm(bm, bn, bk), CUDA("cuda"))
    assert isinstance(result, AnalysisResult)
    assert result.total_flops == 2 * M * N * K
    # A is read once per column block, B once per row block, C written once (fp16: 2 bytes)
    want = 2 * (M * K * (N // bn) + N * K * (M // bm) + M * N)
    assert result.total_global_bytes == want
    assert result.estimated_time is None and result.expected_tflops is None  # no peak rates known


def test_block_counts_are_the_grid_of_the_last_count():
    analyzer = Analyzer(gemm(128, 128, 32), CUDA("cuda"))
    assert analyzer.block_counts == {"blockIdx.x": 1, "blockIdx.y": 1, "blockIdx.z": 1}
    analyzer.block_counts["blockIdx.y"] = 7  # a stale value does not leak into the count
    result = analyzer.ir_pass().calculate()
    assert analyzer.block_counts == {"blockIdx.x": N // 128, "blockIdx.y": M // 128, "blockIdx.z": 1}
    assert result.total_flops == 2 * M * N * K


def test_a_parallel_nest_moves_one_element_per_iteration_and_access():
    @T.prim_func
    def axpy(
        X: T.Tensor((1024,), "float32"), Y: T.Tensor((1024,), "float32"), Z: T.Tensor((1024,), "float16")
    ):
        with T.Kernel(8, threads=128) as b:
            for i in T.Parallel(128):
                Z[b * 128 + i] = T.Cast("float16", X[b * 128 + i] * 2.0 + Y[b * 128 + i])

    result = Analyzer.analysis(axpy)
    assert result.total_flops == 0
    assert result.total_global_bytes == 1024 * (4 + 4 + 2)


def test_the_eager_form_of_the_example():
    # examples/analyze: an eager kernel with module-level dims, get_tir from the config alone
    @tilelang.jit
    def kernel(A, B, block_M=None, block_N=None, block_K=None):
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((N, K), T.float16)
        C = T.empty((M, N), T.float16)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
        return C

    func = kernel.get_tir(block_M=128, block_N=128, block_K=32)
    assert Analyzer.analysis(func, CUDA("cuda")).total_flops == 2 * M * N * K


def test_a_roofline_where_the_device_states_its_rates():
    device = types.SimpleNamespace(peak_tflops=100.0, bandwidth_GBps=1000.0)
    result = Analyzer.analysis(gemm(128, 128, 32), device)
    flops_time = 2 * M * N * K / 100e12
    bytes_time = result.total_global_bytes / 1000e9
    assert result.estimated_time == pytest.approx(max(flops_time, bytes_time))
    assert (result.expected_tflops, result.expected_bandwidth_GBps) == (100.0, 1000.0)


def test_symbolic_extents_are_a_typed_error():
    n = T.dynamic("n")

    @T.prim_func
    def dyn(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as b:
            for i in T.Parallel(128):
                if b * 128 + i < n:
                    Y[b * 128 + i] = X[b * 128 + i]

    with pytest.raises(AnalysisError, match="not a constant"):
        Analyzer.analysis(dyn)
    with pytest.raises(AnalysisError, match="PrimFunc"):
        Analyzer.analysis("not a program")
