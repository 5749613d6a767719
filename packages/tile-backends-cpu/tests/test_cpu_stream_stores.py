"""Pass stream_stores: rows of outputs larger than the last-level cache go out with non-temporal stores."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu._src import backend, stream_stores, ukernels
from tile.ops.norm import rms_norm_kernel, softmax_kernel

needs_stream = pytest.mark.skipif(
    not ukernels.use_stream_stores(), reason="not an x86-64 host, or no host compiler to build the helper"
)


@pytest.fixture
def small_llc(monkeypatch):
    """Pretend the last-level cache is 1 MiB so that test-sized outputs count as large; no kernel cache."""
    monkeypatch.setenv("TILE_CACHE", "0")
    monkeypatch.setattr(stream_stores, "last_level_cache_bytes", lambda: 1 << 20)


def compile_cpu(func, monkeypatch, stream=True, **kwargs):
    if stream:
        return tilelang.compile(func, target="cpu", **kwargs)
    full = backend.pipeline
    monkeypatch.setattr(backend, "pipeline", lambda t: [p for p in full(t) if p.name != "stream_stores"])
    try:
        return tilelang.compile(func, target="cpu", **kwargs)
    finally:
        monkeypatch.setattr(backend, "pipeline", full)


def streams(kernel) -> bool:
    return f"@{ukernels.STREAM_STORE_SYMBOL}(" in kernel.artifact.sources["llvm"]


def softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@needs_stream
@pytest.mark.parametrize("M,N", [(512, 1024), (96, 3000)])  # 2 MiB and 1.1 MiB outputs
def test_softmax_rows_stream_and_match_numpy(small_llc, monkeypatch, M, N):
    func = softmax_kernel(M, N)
    kernel = compile_cpu(func, monkeypatch, out_idx=[-1])
    plain = compile_cpu(func, monkeypatch, stream=False, out_idx=[-1])
    assert streams(kernel) and not streams(plain)
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    y = np.asarray(kernel(x))
    np.testing.assert_allclose(y, softmax_ref(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(y, np.asarray(plain(x)))  # the same arithmetic, other stores


@needs_stream
def test_rms_norm_rows_stream_and_match_numpy(small_llc, monkeypatch):
    kernel = compile_cpu(rms_norm_kernel(512, 1024), monkeypatch, out_idx=[-1])
    assert streams(kernel)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    w = rng.standard_normal(1024).astype(np.float32)
    expected = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(np.asarray(kernel(x, w)), expected, rtol=1e-5, atol=1e-6)


@needs_stream
def test_outputs_that_fit_in_cache_keep_ordinary_stores(monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = compile_cpu(softmax_kernel(512, 1024), monkeypatch, out_idx=[-1])  # 2 MiB < the real LLC
    assert not streams(kernel)


@needs_stream
def test_short_rows_keep_ordinary_stores(small_llc, monkeypatch):
    kernel = compile_cpu(softmax_kernel(4096, 128), monkeypatch, out_idx=[-1])  # 512-byte rows
    assert not streams(kernel)


def in_place_softmax(M, N, block_M=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, X[bx * block_M, 0])

    return main


@needs_stream
def test_an_output_the_kernel_also_reads_keeps_ordinary_stores(small_llc, monkeypatch):
    kernel = compile_cpu(in_place_softmax(512, 1024), monkeypatch)
    assert not streams(kernel)
    x = np.random.default_rng(2).standard_normal((512, 1024)).astype(np.float32)
    expected = softmax_ref(x.astype(np.float64))
    kernel(x)
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-7)


@needs_stream
def test_stream_store_copies_any_alignment_and_length():
    lib = ctypes.CDLL(str(ukernels.library(ukernels.STREAM)))
    fn = lib[ukernels.STREAM_STORE_SYMBOL]
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    fn.restype = ctypes.c_int
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, 4096, dtype=np.uint8)
    for dst_off in (0, 1, 13, 63, 64):
        for src_off in (0, 7):
            for length in (0, 1, 50, 64, 65, 127, 200, 1000, 3000):
                dst = np.zeros(4096 + 64, np.uint8)
                fn(dst.ctypes.data + dst_off, src.ctypes.data + src_off, length)
                expected = np.zeros_like(dst)
                expected[dst_off : dst_off + length] = src[src_off : src_off + length]
                np.testing.assert_array_equal(dst, expected, err_msg=f"{dst_off=} {src_off=} {length=}")


def test_the_cache_a_process_counts_on_is_its_cores_share(monkeypatch):
    """A hypervisor guest sees the host's whole last-level cache (480 MiB on this project's
    2-core machines): the share counted is at most LLC_BYTES_PER_CORE per core."""
    from tile.backends.cpu._src import host

    monkeypatch.setattr(host, "_reported_llc_bytes", lambda: 480 << 20)
    monkeypatch.setattr(host, "core_count", lambda: 2)
    host.last_level_cache_bytes.cache_clear()
    try:
        assert host.last_level_cache_bytes() == 24 << 20  # 2 x 12 MiB, not 480 MiB
        monkeypatch.setattr(host, "_reported_llc_bytes", lambda: 16 << 20)
        host.last_level_cache_bytes.cache_clear()
        assert host.last_level_cache_bytes() == 16 << 20  # a desktop's 16 MiB over 2 cores is all its own
    finally:
        host.last_level_cache_bytes.cache_clear()
