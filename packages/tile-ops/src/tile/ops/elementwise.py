"""Elementwise operators written in tile.lang: ``add`` and ``scale``.

Each tile of ``block_M x block_N`` elements is copied to fragments, combined with
``T.Parallel`` and copied back; tails (sizes that are not multiples of the block)
are handled by ``T.copy``'s bounds guards.

Example::

    >>> import numpy as np
    >>> from tile.ops.elementwise import add
    >>> a = np.ones((5, 7), "float32"); b = np.full((5, 7), 2, "float32")
    >>> float(add(a, b, target="cpu")[4, 6])
    3.0
"""

from __future__ import annotations

from typing import Any

import tile.lang.language as T

from ._src.runtime import compiled, dtype_name, matrix_dims


def add_kernel(M: int, N: int, dtype: str, block_M: int = 32, block_N: int = 64) -> Any:
    """A kernel computing ``C = A + B`` for (M, N) tensors of ``dtype``."""

    @T.prim_func
    def add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_frag = T.alloc_fragment((block_M, block_N), dtype)
            B_frag = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], A_frag)
            T.copy(B[by * block_M, bx * block_N], B_frag)
            for i, j in T.Parallel(block_M, block_N):
                A_frag[i, j] = A_frag[i, j] + B_frag[i, j]
            T.copy(A_frag, C[by * block_M, bx * block_N])

    return add


def scale_kernel(M: int, N: int, dtype: str, factor: float, block_M: int = 32, block_N: int = 64) -> Any:
    """A kernel computing ``B = factor * A`` for (M, N) tensors of ``dtype``."""

    @T.prim_func
    def scale(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            frag = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], frag)
            for i, j in T.Parallel(block_M, block_N):
                frag[i, j] = frag[i, j] * T.cast(factor, dtype)
            T.copy(frag, B[by * block_M, bx * block_N])

    return scale


def add(a: Any, b: Any, target: str = "auto") -> Any:
    """``a + b`` for two 2-D arrays of the same shape and dtype (numpy or CPU torch)."""
    m, n = matrix_dims("add", "a", a)
    return compiled(add_kernel, (-1,), target, m, n, dtype_name(a))(a, b)


def scale(a: Any, factor: float, target: str = "auto") -> Any:
    """``factor * a`` for a 2-D array (numpy or CPU torch)."""
    m, n = matrix_dims("scale", "a", a)
    return compiled(scale_kernel, (-1,), target, m, n, dtype_name(a), float(factor))(a)
