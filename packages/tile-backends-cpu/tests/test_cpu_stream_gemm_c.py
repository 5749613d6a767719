"""Pass stream_gemm_c: the bf16 C of a large bf16 GEMM is rounded and streamed by tile_bf16_store_c."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cpu._src import backend, stream_gemm_c, ukernels
from tile.ops.gemm import matmul_kernel

needs_ukernel = pytest.mark.skipif(
    not ukernels.use_bf16_gemm_ukernel(),
    reason="no AVX-512 BF16 on this CPU, or no host compiler to build the micro-kernel",
)
P, INT = ctypes.c_void_p, ctypes.c_int


def _rounded_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, to nearest even (what T.Cast("bfloat16", x) computes), in numpy integers;
    NaN -> quiet NaN with its sign."""
    bits = x.view(np.uint32).astype(np.uint64)
    nearest = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(np.isnan(x), (bits >> 16) | 0x40, nearest).astype(np.uint16)


@needs_ukernel
@pytest.mark.parametrize("stream", [0, 1])
# destination rows on a line, one element past it, 34 bytes past it, and one byte past it (a misaligned array)
@pytest.mark.parametrize("offset", [0, 2, 34, 1])
def test_store_c_rounds_to_nearest_even_and_stays_inside_the_block(stream, offset):
    lib = ctypes.CDLL(str(ukernels.bf16_gemm_library()))
    lib.tile_bf16_store_c.argtypes = [P, INT, P, INT, INT, INT, INT]
    rows, cols, lds, ldd = 5, 77, 80, 128
    rng = np.random.default_rng(offset)
    src = (rng.standard_normal((rows, lds)) * 100).astype(np.float32)
    # ties: 1 + 2^-8 rounds down to 1 (even), 1 + 3 * 2^-8 up to 1 + 2^-6; overflow to inf; signed zero
    src[0, :6] = [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.4e38, -np.inf, -0.0]
    # NaN whose rounding carry would reach the sign (all-ones payload) or the exponent (signalling)
    src[1, 40:43] = np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001], np.uint32).view(np.float32)
    raw = np.full(2 * (rows * ldd + 64), 0xAB, np.uint8)
    raw = raw[(-raw.ctypes.data) % 64 :]  # raw[0] on a 64-byte line
    start = raw.ctypes.data + offset
    assert lib.tile_bf16_store_c(start, ldd, src.ctypes.data, lds, rows, cols, stream) == 0
    out = raw[offset : offset + 2 * rows * ldd].copy().view(np.uint16).reshape(rows, ldd)
    np.testing.assert_array_equal(out[:, :cols], _rounded_bits(src[:, :cols]))
    assert (out[:, cols:] == 0xABAB).all() and (raw[:offset] == 0xAB).all()  # nothing outside the block
    # the integer rounding agrees with ml_dtypes' float32 -> bfloat16 conversion on the numbers
    numbers = ~np.isnan(src[:, :cols])
    converted = src[:, :cols][numbers].astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(out[:, :cols][numbers], converted)
    assert np.isnan(out[1, 40:43].view(ml_dtypes.bfloat16).astype(np.float32)).all()
    firsts = [float(v) for v in out[0, :6].view(ml_dtypes.bfloat16)]
    assert firsts == [1.0, 1 + 2**-6, -1.0, np.inf, -np.inf, 0.0]


def _compile(M, N, K, bm, bn, bk, monkeypatch, streamed):
    func = matmul_kernel(M, N, K, dtype="bfloat16", accum_dtype="float32", block_M=bm, block_N=bn, block_K=bk,
                         num_stages=3)
    if streamed:
        return tilelang.compile(func, out_idx=[-1], target="cpu")
    full = backend.pipeline
    monkeypatch.setattr(backend, "pipeline", lambda t: [p for p in full(t) if p.name != "stream_gemm_c"])
    try:
        return tilelang.compile(func, out_idx=[-1], target="cpu")
    finally:
        monkeypatch.setattr(backend, "pipeline", full)


def _streams(kernel) -> bool:
    return f"@{ukernels.BF16_STORE_C_SYMBOL}(" in kernel.artifact.sources["llvm"]


@needs_ukernel
@pytest.mark.parametrize(
    "M,N,K,bm,bn,bk,streamed",
    [
        (256, 192, 256, 64, 64, 32, True),
        (128, 96, 96, 128, 32, 32, True),  # 64-byte C rows, one block row
        # ragged edge blocks: their K loop does not fold and C is written under a bounds test, as generated
        (200, 176, 256, 64, 128, 64, False),
    ],
)
def test_paper_gemm_streams_c_and_matches_the_generated_stores(monkeypatch, M, N, K, bm, bn, bk, streamed):
    monkeypatch.setenv("TILE_CACHE", "0")
    monkeypatch.setattr(stream_gemm_c, "stream_threshold_bytes", lambda: 1)  # every C counts as large
    kernel = _compile(M, N, K, bm, bn, bk, monkeypatch, streamed=True)
    plain = _compile(M, N, K, bm, bn, bk, monkeypatch, streamed=False)
    assert _streams(kernel) == streamed and not _streams(plain)
    rng = np.random.default_rng(M + N)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    out = np.asarray(kernel(a, b))
    np.testing.assert_array_equal(out.view(np.uint16), np.asarray(plain(a, b)).view(np.uint16))
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), expected, rtol=1e-2, atol=1e-2)


@needs_ukernel
def test_a_c_within_the_l2_caches_keeps_ordinary_stores(monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")
    assert stream_gemm_c.stream_threshold_bytes() > 256 * 192 * 2
    assert not _streams(_compile(256, 192, 256, 64, 64, 32, monkeypatch, streamed=True))
