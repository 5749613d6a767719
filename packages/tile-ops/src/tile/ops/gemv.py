"""``gemv``: a row vector times a matrix, ``y = x @ W``, written in tile.lang.

The program is what one would write for a GPU: each block owns ``block_N`` output
columns, walks K in ``block_K`` tiles (staged through shared memory by a pipelined
copy) and accumulates a ``1 x block_N`` fragment with ``T.gemm``. It streams every
element of W once, so its speed is the memory bandwidth; blocks are wide along N so
each row segment of W read by a block is a long contiguous run.

Example::

    >>> import numpy as np
    >>> from tile.ops.gemv import gemv
    >>> x = np.ones((1, 5), "float32"); w = np.arange(15, dtype="float32").reshape(5, 3)
    >>> gemv(x, w, target="cpu").tolist()
    [[30.0, 35.0, 40.0]]
"""

from __future__ import annotations

import functools
from typing import Any

import tile.lang as tilelang
import tile.lang.language as T

from ._src.configs import Tiling, tiled
from ._src.errors import bad_argument
from ._src.runtime import dtype_name, product_dims, target_key


@tiled(block_N=2048, block_K=8, num_stages=2, threads=128)
def gemv_kernel(
    N: int, K: int, dtype: str = "float32", accum_dtype: str = "float32", *, tiling: Tiling
) -> Any:
    """``y = x @ W`` with x (1, K), W (K, N), y (1, N); accumulates in ``accum_dtype``. The
    tiling is keyword arguments (``block_N=1024, ...``) or one ``tiling=Tiling(...)``."""
    block_N, block_K, num_stages, threads = tiling.block_N, tiling.block_K, tiling.num_stages, tiling.threads

    @T.prim_func
    def gemv(x: T.Tensor((1, K), dtype), W: T.Tensor((K, N), dtype), y: T.Tensor((1, N), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            x_shared = T.alloc_shared((1, block_K), dtype)
            W_shared = T.alloc_shared((block_K, block_N), dtype)
            y_local = T.alloc_fragment((1, block_N), accum_dtype)
            T.clear(y_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(x[0, k * block_K], x_shared)
                T.copy(W[k * block_K, bx * block_N], W_shared)
                T.gemm(x_shared, W_shared, y_local)
            T.copy(y_local, y[0, bx * block_N])

    return gemv


@functools.cache
def _compiled(N: int, K: int, dtype: str, target: str) -> Any:
    return tilelang.compile(gemv_kernel(N, K, dtype=dtype), out_idx=[-1], target=target)


def gemv(x: Any, w: Any, target: str = "auto") -> Any:
    """``x @ w`` for x (1, K) and w (K, N) (numpy or CPU torch) of one dtype; fp32 accumulation."""
    m, k, n = product_dims("gemv", x, w, ("x", "w"), "(1, K) @ (K, N)")
    if m != 1:
        raise bad_argument("gemv", "x", f"has {m} rows", "gemv computes (1, K) @ (K, N): use matmul")
    return _compiled(n, k, dtype_name(x), target_key(target))(x, w)
