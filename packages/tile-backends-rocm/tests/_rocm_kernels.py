"""The example kernels the ROCm tests compile (and run under emulation), by name.

GEMM, FlashAttention forward, softmax, RMSNorm and the dequantized GEMM come from
``tile.ops``; split-K (``T.gemm`` per K slice, then ``T.atomic_add`` of the partial
product into an fp32 C) from ``tile.testsupport.kernels``.
"""

from __future__ import annotations

import functools
from typing import Any

import tile.lang.language as T
from tile.ops.attention import flash_attention_kernel
from tile.ops.dequant_gemm import dequant_gemm_kernel
from tile.ops.gemm import matmul_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.kernels import pipelined_gemm, split_k_gemm


def split_k_gemm_kernel(
    M: int, N: int, K: int, splits: int, block_M: int = 64, block_N: int = 64, threads: int = 128
) -> Any:
    """``C += A @ B`` on float16 operands with K cut into ``splits`` slices, one block per
    (tile, slice), one pipeline stage; C is fp32."""
    return split_k_gemm(M, N, K, block_M, block_N, 32, splits, "float16", num_stages=1, threads=threads)


def half_column_max_kernel() -> Any:
    """``Y[j] = max_i X[i, j]`` on a float16 tile in shared memory (one wave)."""

    @T.prim_func
    def column_max(X: T.Tensor((4, 64), "float16"), Y: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=64) as _bx:
            tile = T.alloc_shared((4, 64), "float16")
            out = T.alloc_fragment((64,), "float16")
            T.copy(X, tile)
            T.reduce_max(tile, out, dim=0)
            T.copy(out, Y)

    return column_max


def cast_kernel(in_dtype: str, out_dtype: str, M: int = 64, N: int = 64) -> Any:
    """``Y = X * 2 + 1`` through a float32 fragment: the casts in and out of ``in/out_dtype``."""

    @T.prim_func
    def cast(X: T.Tensor((M, N), in_dtype), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(1, threads=64) as _bx:
            F = T.alloc_fragment((M, N), "float32")
            T.copy(X, F)
            for i, j in T.Parallel(M, N):
                F[i, j] = F[i, j] * 2.0 + 1.0
            T.copy(F, Y)

    return cast


def register_operands_gemm_kernel(
    M: int = 16, N: int = 16, K: int = 32, threads: int = 64, dtype: str = "float16", accum: str = "float32"
) -> Any:
    """``C = A @ B`` with A and B copied straight from global memory into fragments (registers)."""

    @T.prim_func
    def reg_gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=threads) as _bx:
            A_f = T.alloc_fragment((M, K), dtype)
            B_f = T.alloc_fragment((K, N), dtype)
            C_f = T.alloc_fragment((M, N), accum)
            T.copy(A, A_f)
            T.copy(B, B_f)
            T.clear(C_f)
            T.gemm(A_f, B_f, C_f)
            T.copy(C_f, C)

    return reg_gemm


def int8_gemm_kernel(
    M: int, N: int, K: int, block_M: int = 64, block_N: int = 64, block_K: int = 32, threads: int = 128
) -> Any:
    """``C = A @ B`` on int8 operands with an int32 accumulator and output (exact)."""
    return typed_gemm_kernel(M, N, K, "int8", "int32", block_M, block_N, block_K, threads)


def typed_gemm_kernel(
    M: int, N: int, K: int, dtype: str, accum: str, block_M: int = 64, block_N: int = 64, block_K: int = 32,
    threads: int = 128, impl: str | None = None,
) -> Any:  # fmt: skip
    """``C = A @ B`` with ``dtype`` operands and an ``accum`` accumulator and output, one
    pipeline stage (``tile.testsupport.kernels.pipelined_gemm``); ``impl`` is ``T.gemm``'s
    (``"ck"``: composable_kernel's warp gemm)."""
    options = {"num_stages": 1, "threads": threads, "accum": accum, "out_dtype": accum, "impl": impl}
    return pipelined_gemm(M, N, K, block_M, block_N, block_K, dtype, **options)


CASES: dict[str, Any] = {
    # The compile-only configs (the examples at CDNA-sized tiles: 256 threads = 4 waves).
    "gemm": lambda: matmul_kernel(512, 512, 512, block_M=128, block_N=128, block_K=32, threads=256),
    "gemm_bf16": lambda: matmul_kernel(256, 256, 256, "bfloat16", block_M=64, block_N=64, threads=256),
    "flash_attention": lambda: flash_attention_kernel(
        1, 2, 256, 64, False, block_M=64, block_N=64, threads=256
    ),
    "softmax": lambda: softmax_kernel(1024, 512, "float16"),
    "rms_norm": lambda: rms_norm_kernel(1024, 512, "float16"),
    "split_k": lambda: split_k_gemm_kernel(256, 256, 512, 4),
    "dequant_gemm": lambda: dequant_gemm_kernel(256, 256, 256, "int4", threads=256),
    # One wave on a 32 x 48 tile: 48 columns split into no 32x32 tiles, so 16x16 MFMAs.
    "gemm_one_wave": lambda: matmul_kernel(64, 96, 64, block_M=32, block_N=48, block_K=32, threads=64),
    "int8_gemm": lambda: int8_gemm_kernel(64, 96, 64, block_M=32, block_N=48, threads=64),
    "int8_gemm_32": lambda: int8_gemm_kernel(128, 128, 64, block_M=64, block_N=64, threads=128),
}


@functools.cache
def kernel(name: str) -> Any:
    return CASES[name]()


def hide_hip_compilers(monkeypatch: Any, tmp_path: Any) -> None:
    """Point every compiler variable at a missing file: ``select_hip_compiler`` then finds
    nothing (each variable, when set, is the only place searched), so builds under
    ``TILE_DEVICE=emu`` keep the HIP source and no code object."""
    for var in ("TILE_HIPCC", "TILE_AMDCLANG", "TILE_HIP_CLANG"):
        monkeypatch.setenv(var, str(tmp_path / f"missing-{var.lower()}"))


def need_compiler(arch: str) -> None:
    """Skip the calling test unless a compiler here builds ``arch`` code objects (the reason
    is the selection's own answer: what was tried and what to install)."""
    import pytest

    from tile.backends.rocm._src.compiler import compiler_supports

    ok, why = compiler_supports(arch)
    if not ok:
        pytest.skip(f"no compiler here builds {arch} (apt-get install clang-19 lld-19 llvm-19): {why}")


def assert_lds_reads_wait_for_dma(asm: str) -> list[str]:
    """Every LDS read (``ds_read*``) after an LDS DMA load (``buffer_load_* ... lds``) has an
    ``s_waitcnt vmcnt`` between them; returns the disassembly's lines."""
    import re

    lines = asm.splitlines()
    dma = [i for i, line in enumerate(lines) if re.search(r"\bbuffer_load_\w+\b.*\blds\b", line)]
    reads = [i for i, line in enumerate(lines) if re.search(r"\bds_read", line)]
    assert dma and reads
    for r in reads:
        before = [i for i in dma if i < r]
        if before:
            assert any(re.search(r"s_waitcnt vmcnt\(\d+\)", line) for line in lines[before[-1] : r])
    return lines

