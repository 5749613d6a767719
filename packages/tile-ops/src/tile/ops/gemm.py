"""``matmul``: the paper's tiled GEMM (Figure 1) written in tile.lang (the program is
``tile.lang.demo.matmul``; this module adds the tiling per target).

Example::

    >>> import numpy as np
    >>> from tile.ops.gemm import matmul
    >>> a = np.ones((3, 5), "float32"); b = np.ones((5, 2), "float32")
    >>> float(matmul(a, b, target="cpu")[2, 1])
    5.0
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.demo import matmul as paper_gemm

from ._src.configs import Tiling, tiled
from ._src.runtime import dtype_name, product_dims, target_key


@tiled(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128, panel=0)
def matmul_kernel(
    M: int, N: int, K: int, dtype: str = "float16", accum_dtype: str = "float32", *, tiling: Tiling
) -> Any:
    """``C = A @ B`` with A (M, K), B (K, N), C (M, N); accumulates in ``accum_dtype``.

    The tiling is keyword arguments (``block_M=128, ...``) or one ``tiling=GemmConfig(...)``.
    ``panel > 0`` visits the blocks in panels of that many block rows (``T.use_swizzle``),
    so that the blocks resident at one time share their A and B panels in L2.
    """
    t = tiling
    return paper_gemm(M, N, K, t.block_M, t.block_N, t.block_K, dtype, accum_dtype,
                      num_stages=t.num_stages, threads=t.threads, panel=t.panel)


@dataclasses.dataclass(frozen=True)
class GemmConfig(Tiling):
    """The tiling ``matmul_kernel`` takes, with its defaults (``fp8_matmul_kernel`` takes it
    whole too)."""

    num_stages: int = 2

    def __str__(self) -> str:
        return (f"{self.block_M}x{self.block_N}x{self.block_K}:{self.num_stages}:{self.threads}"
                + (f":{self.panel}" if self.panel else ""))

    @classmethod
    def parse(cls, text: str) -> GemmConfig:
        """The inverse of ``str``: ``BMxBNxBK:stages:threads[:panel]``."""
        tiles, stages, threads, *panel = text.split(":")
        bm, bn, bk = (int(x) for x in tiles.split("x"))
        return cls(bm, bn, bk, int(stages), int(threads), int(panel[0]) if panel else 0)


FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
FP8_OUT_DTYPES = ("bfloat16", "float16", "float32")
"""What an fp8 product may be stored as (its float32 accumulators rounded once)."""


FP8_SMALL_TILE = GemmConfig(64, 64, 64, 2, 128)
"""The fp8 tiling of small problems: K tiles of 64 bytes, two k32 instructions."""


def fp8_matmul_kernel(
    M: int, N: int, K: int, dtype: str, out_dtype: str, tiling: GemmConfig = FP8_SMALL_TILE
) -> Any:
    """``C = A @ W.T`` for fp8 A (M, K) and W (N, K) (B's transpose: a column-major B, as fp8
    weights are usually kept), float32 accumulation, C (M, N) in ``out_dtype``, tiled as
    ``tiling`` says (``fp8_gemm_config``). W's tiles are K-contiguous, as 8-bit tensor-core
    instructions need (wgmma reads 8-bit operands K-major only)."""
    block_M, block_N, block_K = tiling.block_M, tiling.block_N, tiling.block_K

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), C: T.Tensor((M, N), out_dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=tiling.threads) as (bx, by):
            T.use_swizzle(max(tiling.panel, 1), enable=tiling.panel > 0)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            W_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=tiling.num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(W[bx * block_N, k * block_K], W_shared)
                T.gemm(A_shared, W_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


WIDE_TILE = (128, 256, 64)
"""The tile of targets with a warpgroup-wide MMA (m = 64 per instruction): two consumer
warpgroups, each a 128x128 half of the tile."""


def gemm_config(M: int, N: int, K: int, dtype: str, target: Any = "auto") -> GemmConfig:
    """The tiling ``matmul`` uses for ``(M, K) @ (K, N)`` on ``target``, from its capabilities.

    A target whose MMA instructions span a warpgroup (an ``mma_shapes`` entry with m >= 64,
    e.g. sm_90a's wgmma), 2-byte inputs, at least one 128x256 tile, and three stages of the
    tiles on chip: 128x256x64 tiles, 3 stages, 256 threads, block panels of 8 rows so the
    blocks resident together share their A and B panels in L2 (on an H100: the paper's M0-M7
    at 0.59-0.98x of cuBLAS, against 0.36-0.48x at 128x128x32; bench/RESULTS.md).
    Other targets with tensor-core MMA and asynchronous copies: the paper's 128x128x32, 3
    stages. A CPU with a matrix unit for the input type (AMX-BF16), whose blocks are single
    threads, and a grid of at least one 128x128 block per core: 128x128x32 as well. Anything
    else: 64x64x32. (The autotuner's hints go here.)
    """
    from tile.ir.backend import resolve_target
    from tile.ir.errors import TargetError

    try:
        resolved, manifest = resolve_target(target)  # "auto", and an arch-less target completed
    except TargetError:  # its backend is not installed: no capabilities to read
        return GemmConfig()
    return gemm_config_for(manifest.capabilities(resolved), M, N, K, dtype)


def gemm_config_for(caps: Any, M: int, N: int, K: int, dtype: str) -> GemmConfig:
    """``gemm_config`` given the target's ``tile.ir.backend.Capabilities``."""
    if dtype in FP8_DTYPES:
        return fp8_gemm_config(caps, M, N, dtype)
    if dtype not in ("float16", "bfloat16"):
        return GemmConfig()
    wide_mma = any(m >= 64 for m, _, _ in caps.mma_shapes)
    fits = 3 * (WIDE_TILE[0] + WIDE_TILE[1]) * WIDE_TILE[2] * 2 <= caps.shared_bytes
    if wide_mma and fits and WIDE_TILE[0] <= M and WIDE_TILE[1] <= N:
        return GemmConfig(*WIDE_TILE, 3, 256, panel=8)
    if caps.mma_shapes and caps.async_copy and M >= 128 and N >= 128:
        return GemmConfig(128, 128, 32, 3, 128)
    blocks = (M // 128) * (N // 128)
    if _single_thread_blocks_with_mma(caps, dtype) and blocks >= max(caps.compute_units, 1):
        return GemmConfig(128, 128, 32, 3, 128)
    return GemmConfig()


def _single_thread_blocks_with_mma(caps: Any, dtype: str) -> bool:
    """Blocks run as one thread on a core with a matrix unit for ``dtype`` inputs (a CPU's AMX-BF16).

    There a block's tile product is one micro-kernel call, and 128x128 blocks cost 12-19% less CPU
    time than 64x64 ones on the bf16 GEMM at 1024^3-4096^3 (bench/RESULTS.md, branch ``amx4``):
    each call reads its A rows and B panels from L2 for four times the products. The grid must
    still give every core a block.
    """
    return not caps.thread_binding and any(i.input_dtype == dtype for i in caps.mma_instructions)


FP8_WIDE_TILE = (128, 256, 128)
"""The fp8 tile of targets with a warpgroup-wide fp8 MMA: ``WIDE_TILE`` with the same 128 bytes
of K per row (one 128-byte swizzle row, four m64nNk32 steps)."""


def fp8_gemm_config(caps: Any, M: int, N: int, dtype: str) -> GemmConfig:
    """The tiling of ``fp8_matmul_kernel``: as ``gemm_config_for`` for 16-bit inputs, with twice
    the K per tile (K is in bytes what the 16-bit tiles hold), and the warpgroup tile only where
    the target has a warpgroup MMA for ``dtype``."""
    wide_mma = any(i.m >= 64 and i.input_dtype == dtype for i in caps.mma_instructions)
    bm, bn, bk = FP8_WIDE_TILE
    fits = 3 * (bm + bn) * bk <= caps.shared_bytes
    if wide_mma and fits and bm <= M and bn <= N:
        return GemmConfig(bm, bn, bk, 3, 256, panel=8)
    if caps.async_copy and M >= 128 and N >= 128:
        return GemmConfig(128, 128, 64, 3, 128)
    return FP8_SMALL_TILE


@functools.cache
def _compiled(M: int, N: int, K: int, dtype: str, target: str) -> Any:
    config = gemm_config(M, N, K, dtype, target)
    return tilelang.compile(matmul_kernel(M, N, K, dtype, tiling=config), out_idx=[-1], target=target)


def matmul(a: Any, b: Any, target: str = "auto") -> Any:
    """``a @ b`` for 2-D arrays (numpy or torch) of one dtype; fp32 accumulation; the tiling
    is ``gemm_config``'s for the target."""
    m, k, n = product_dims("matmul", a, b)
    return _compiled(m, n, k, dtype_name(a), target_key(target))(a, b)
