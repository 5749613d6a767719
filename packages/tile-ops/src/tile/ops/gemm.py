"""``matmul``: the paper's tiled GEMM (Figure 1) written in tile.lang.

Example::

    >>> import numpy as np
    >>> from tile.ops.gemm import matmul
    >>> a = np.ones((3, 5), "float32"); b = np.ones((5, 2), "float32")
    >>> float(matmul(a, b, target="cpu")[2, 1])
    5.0
"""

from __future__ import annotations

import functools
from typing import Any

import tile.lang as tilelang
import tile.lang.language as T


def matmul_kernel(
    M: int,
    N: int,
    K: int,
    dtype: str = "float16",
    accum_dtype: str = "float32",
    block_M: int = 64,
    block_N: int = 64,
    block_K: int = 32,
    num_stages: int = 2,
    threads: int = 128,
) -> Any:
    """``C = A @ B`` with A (M, K), B (K, N), C (M, N); accumulates in ``accum_dtype``."""

    @T.prim_func
    def matmul(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return matmul


@functools.cache
def _compiled(M: int, N: int, K: int, dtype: str, target: str) -> Any:
    return tilelang.compile(matmul_kernel(M, N, K, dtype=dtype), out_idx=[-1], target=target)


def matmul(a: Any, b: Any, target: str = "auto") -> Any:
    """``a @ b`` for 2-D arrays (numpy or CPU torch) of one dtype; fp32 accumulation."""
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    dtype = str(a.dtype).removeprefix("torch.")
    kernel = _compiled(int(a.shape[0]), int(b.shape[1]), int(a.shape[1]), dtype, target)
    return kernel(a, b)
