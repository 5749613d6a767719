"""Row-wise normalizations written in tile.lang: ``softmax`` and ``rms_norm``.

Each block owns ``block_M`` whole rows: the row is copied into a fragment in the
accumulation type, reduced with ``T.reduce_max``/``T.reduce_sum`` and rescaled in
``T.Parallel`` loops. Row counts that are not multiples of ``block_M`` are handled by
``T.copy``'s bounds guards; the padded rows are computed and never stored.

Example::

    >>> import numpy as np
    >>> from tile.ops.norm import softmax
    >>> y = softmax(np.zeros((3, 4), "float32"), target="cpu")
    >>> float(y[2, 3])
    0.25
"""

from __future__ import annotations

from typing import Any

import tile.lang.language as T

from ._src.configs import Tiling, tiled
from ._src.errors import bad_argument
from ._src.runtime import compiled, dtype_name, matrix_dims


@tiled(block_M=16, threads=128)
def softmax_kernel(
    M: int, N: int, dtype: str = "float32", accum_dtype: str = "float32", *, tiling: Tiling
) -> Any:
    """``Y[i, :] = exp(X[i, :] - max X[i, :]) / sum exp(...)`` for (M, N) tensors; ``block_M``
    rows per block (keyword arguments, or one ``tiling=Tiling(...)``)."""
    block_M, threads = tiling.block_M, tiling.threads

    @T.prim_func
    def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i in T.Parallel(block_M):
                row_sum[i] = 1.0 / row_sum[i]  # one division per row, a multiply per element
            for i, j in T.Parallel(block_M, N):
                x[i, j] *= row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return softmax


@tiled(block_M=16, threads=128)
def rms_norm_kernel(
    M: int, N: int, dtype: str = "float32", accum_dtype: str = "float32", eps: float = 1e-6, *, tiling: Tiling
) -> Any:
    """``Y[i, :] = X[i, :] * rsqrt(mean(X[i, :]**2) + eps) * W`` for X (M, N), W (N,); ``block_M``
    rows per block (keyword arguments, or one ``tiling=Tiling(...)``)."""
    block_M, threads = tiling.block_M, tiling.threads

    @T.prim_func
    def rms_norm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            norm_rows(X, W, Y, bx * block_M, block_M, N, eps, accum_dtype)

    return rms_norm


@T.macro
def norm_rows(X, W, Y, first, rows, N, eps, accum_dtype, B=None, Mean=None, Rstd=None):  # type: ignore[no-untyped-def]
    """The body of an RMSNorm block over ``rows`` rows of X from ``first``, in fragments of
    ``accum_dtype``; given ``Rstd``, the rows' ``inv_rms = rsqrt(mean(x^2) + eps)`` are stored
    there too. Given the bias ``B`` (and ``Mean``), LayerNorm's: the rows are centred on their
    mean first (stored in ``Mean``) and ``B`` is added."""
    x = T.alloc_fragment((rows, N), accum_dtype)
    sq = T.alloc_fragment((rows, N), accum_dtype)
    w = T.alloc_fragment((N,), accum_dtype)
    inv_rms = T.alloc_fragment((rows,), accum_dtype)
    T.copy(X[first, 0], x)
    T.copy(W, w)
    if B is not None:
        b = T.alloc_fragment((N,), accum_dtype)
        mean = T.alloc_fragment((rows,), accum_dtype)
        T.copy(B, b)
        T.reduce_sum(x, mean, dim=1)
        for i in T.Parallel(rows):
            mean[i] = mean[i] / N
    for i, j in T.Parallel(rows, N):
        if B is not None:
            x[i, j] = x[i, j] - mean[i]
        sq[i, j] = x[i, j] * x[i, j]
    T.reduce_sum(sq, inv_rms, dim=1)
    for i in T.Parallel(rows):
        inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
    for i, j in T.Parallel(rows, N):
        if B is None:
            x[i, j] = x[i, j] * inv_rms[i] * w[j]
        else:
            x[i, j] = x[i, j] * inv_rms[i] * w[j] + b[j]
    T.copy(x, Y[first, 0])
    if B is not None:
        T.copy(mean, Mean[first : first + rows])
    if Rstd is not None:
        T.copy(inv_rms, Rstd[first : first + rows])


def softmax(x: Any, target: str = "auto") -> Any:
    """Softmax over the last axis of a 2-D array (numpy or CPU torch); fp32 math."""
    m, n = matrix_dims("softmax", "x", x)
    return compiled(softmax_kernel, (-1,), target, m, n, dtype_name(x))(x)


def rms_norm(x: Any, weight: Any, eps: float = 1e-6, target: str = "auto") -> Any:
    """RMSNorm over the last axis of a 2-D array with a per-column ``weight``; fp32 math."""
    m, n = matrix_dims("rms_norm", "x", x)
    if tuple(weight.shape) != (n,):
        raise bad_argument("rms_norm", "weight", f"has shape {tuple(weight.shape)}", f"pass a ({n},) weight")
    return compiled(rms_norm_kernel, (-1,), target, m, n, dtype_name(x), "float32", float(eps))(x, weight)
