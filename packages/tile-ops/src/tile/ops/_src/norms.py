"""RMSNorm and LayerNorm forward (saving their row statistics) and backward, as tile programs.

Forward kernels take (M, N) rows: one block owns ``block_M`` whole rows in fragments of the
accumulation type. Rows past M read as zeros and are never stored.

Forward kernels also store each row's ``rstd`` (and LayerNorm's ``mean``) in the
accumulation type, so the backward does not recompute the reductions over x.

Backward kernels stream each row once: a block owns ``rows`` consecutive rows and walks
them one at a time, reading the row of x and dy, accumulating the row's share of the weight
(and bias) gradients into (N,) fragments, reducing the row's dot products and writing dx,
all while the row is in the first-level cache; rows past M are skipped. The weight (and
bias) gradients sum over all M rows: each block writes the partial sum of its own rows to row ``bx`` of a
``(ceil(M / rows), N)`` buffer, and the caller adds those few rows up (no float atomics,
deterministic). A reduction over the rows of a (block_M, N) tile instead would walk the
tile by columns, and keeping several such tiles per block spills them out of cache.

    RMSNorm:    y = x * r * w,             r = 1 / sqrt(mean(x^2) + eps)
                dx = r * (dy * w) - x * r^3 * mean(dy * w * x)
                dw = sum_rows dy * x * r
    LayerNorm:  y = xhat * w + b,          xhat = (x - mean) * r,  r = 1 / sqrt(var + eps)
                dx = r * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * w
                dw = sum_rows dy * xhat,   db = sum_rows dy
"""

from __future__ import annotations

import functools
from typing import Any

import tile.lang.language as T

from ..norm import norm_rows
from .configs import Tiling


def norm_fwd_kernel(
    M: int, N: int, eps: float, dtype: str, accum_dtype: str, tiling: Tiling, *, centered: bool
) -> Any:
    """RMSNorm (``centered=False``): ``(X, W) -> (Y, Rstd)``; LayerNorm: ``(X, W, B) -> (Y, Mean,
    Rstd)``; X (M, N), W and B (N,); ``tiling.block_M`` rows per block (``configs.row_config``).
    One ``norm_rows`` body for both."""
    block_M, threads = tiling.block_M, tiling.threads

    @T.prim_func
    def rms_norm_fwd(
        X: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        W: T.Tensor((N,), dtype),  # type: ignore[valid-type]
        Y: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        Rstd: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            norm_rows(X, W, Y, bx * block_M, block_M, N, eps, accum_dtype, Rstd=Rstd)

    @T.prim_func
    def layer_norm_fwd(
        X: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        W: T.Tensor((N,), dtype),  # type: ignore[valid-type]
        B: T.Tensor((N,), dtype),  # type: ignore[valid-type]
        Y: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        Mean: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
        Rstd: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            norm_rows(X, W, Y, bx * block_M, block_M, N, eps, accum_dtype, B, Mean, Rstd)

    return layer_norm_fwd if centered else rms_norm_fwd


rms_norm_fwd_kernel = functools.partial(norm_fwd_kernel, centered=False)
"""``(X, W) -> (Y, Rstd)`` for X (M, N), W (N,)."""
layer_norm_fwd_kernel = functools.partial(norm_fwd_kernel, centered=True)
"""``(X, W, B) -> (Y, Mean, Rstd)`` for X (M, N), W and B (N,)."""


@T.macro
def _norm_bwd_rows(dY, X, W, Mean, Rstd, dX, dW_partial, dB_partial, bx, rows, M, N, accum_dtype):  # type: ignore[no-untyped-def]
    """One block of the backward: rows ``bx * rows ..`` one at a time (see the module
    docstring). LayerNorm passes ``Mean`` and ``dB_partial``, RMSNorm ``None`` for both:
    with ``xhat = (x - mean) * r`` (RMSNorm: ``x * r``) both are
    ``dx = r * (g - mean(g) - xhat * mean(g * xhat))``, RMSNorm without the ``mean(g)`` term."""
    w = T.alloc_fragment((N,), accum_dtype)
    dw = T.alloc_fragment((N,), accum_dtype)
    db = T.alloc_fragment((N,), accum_dtype)
    xhat = T.alloc_fragment((N,), accum_dtype)
    g = T.alloc_fragment((N,), accum_dtype)
    gx = T.alloc_fragment((N,), accum_dtype)
    sum_g = T.alloc_fragment((1,), accum_dtype)
    sum_gx = T.alloc_fragment((1,), accum_dtype)
    T.copy(W, w)
    T.clear(dw)
    if Mean is not None:
        T.clear(db)
    for r in T.serial(rows):
        row = bx * rows + r
        if row < M:
            rstd = Rstd[row]
            T.copy(X[row, :], xhat)
            T.copy(dY[row, :], g)
            for j in T.Parallel(N):
                if Mean is None:
                    xhat[j] = xhat[j] * rstd
                else:
                    xhat[j] = (xhat[j] - Mean[row]) * rstd
                    db[j] += g[j]
                dw[j] += g[j] * xhat[j]
                g[j] = g[j] * w[j]
                gx[j] = g[j] * xhat[j]
            T.reduce_sum(gx, sum_gx, dim=0)
            if Mean is None:
                # RMSNorm reads no mean(g): a cleared sum_g that no reduction replicates
                # would live on one thread only, and the others would read what it is not
                for j in T.Parallel(N):
                    g[j] = rstd * (g[j] - xhat[j] * (sum_gx[0] / N))
            else:
                T.reduce_sum(g, sum_g, dim=0)
                for j in T.Parallel(N):
                    g[j] = rstd * (g[j] - sum_g[0] / N - xhat[j] * (sum_gx[0] / N))
            T.copy(g, dX[row, :])
    T.copy(dw, dW_partial[bx, :])
    if dB_partial is not None:
        T.copy(db, dB_partial[bx, :])


def norm_bwd_kernel(M: int, N: int, dtype: str, accum_dtype: str, tiling: Tiling, *, centered: bool) -> Any:
    """RMSNorm (``centered=False``): ``(dY, X, W, Rstd) -> (dX, dW_partial)``; LayerNorm:
    ``(dY, X, W, Mean, Rstd) -> (dX, dW_partial, dB_partial)``; sum the partials over rows.

    One pass over each row (see the module docstring): ``tiling.block_M`` rows per block, one
    at a time (``configs.norm_bwd_config``).
    """
    rows, threads = tiling.block_M, tiling.threads
    blocks = (M + rows - 1) // rows

    @T.prim_func
    def rms_norm_bwd(
        dY: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        X: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        W: T.Tensor((N,), dtype),  # type: ignore[valid-type]
        Rstd: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
        dX: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        dW_partial: T.Tensor((blocks, N), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(blocks, threads=threads) as bx:
            _norm_bwd_rows(dY, X, W, None, Rstd, dX, dW_partial, None, bx, rows, M, N, accum_dtype)

    @T.prim_func
    def layer_norm_bwd(
        dY: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        X: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        W: T.Tensor((N,), dtype),  # type: ignore[valid-type]
        Mean: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
        Rstd: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
        dX: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        dW_partial: T.Tensor((blocks, N), accum_dtype),  # type: ignore[valid-type]
        dB_partial: T.Tensor((blocks, N), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(blocks, threads=threads) as bx:
            _norm_bwd_rows(dY, X, W, Mean, Rstd, dX, dW_partial, dB_partial, bx, rows, M, N, accum_dtype)

    return layer_norm_bwd if centered else rms_norm_bwd


rms_norm_bwd_kernel = functools.partial(norm_bwd_kernel, centered=False)
"""``(dY, X, W, Rstd) -> (dX, dW_partial)``; ``dW = dW_partial.sum(0)``."""
layer_norm_bwd_kernel = functools.partial(norm_bwd_kernel, centered=True)
"""``(dY, X, W, Mean, Rstd) -> (dX, dW_partial, dB_partial)``; sum the partials over rows."""


def softmax_bwd_kernel(M: int, N: int, dtype: str, accum_dtype: str, tiling: Tiling) -> Any:
    """``(dY, Y) -> dX`` of the row softmax: ``dX = Y * (dY - sum_j dY * Y)``; ``tiling.block_M``
    rows per block (``configs.row_config``)."""
    block_M, threads = tiling.block_M, tiling.threads

    @T.prim_func
    def softmax_bwd(
        dY: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        Y: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        dX: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            y = T.alloc_fragment((block_M, N), accum_dtype)
            dy = T.alloc_fragment((block_M, N), accum_dtype)
            tmp = T.alloc_fragment((block_M, N), accum_dtype)
            dot = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(Y[bx * block_M, 0], y)
            T.copy(dY[bx * block_M, 0], dy)
            for i, j in T.Parallel(block_M, N):
                tmp[i, j] = dy[i, j] * y[i, j]
            T.reduce_sum(tmp, dot, dim=1)
            for i, j in T.Parallel(block_M, N):
                tmp[i, j] = y[i, j] * (dy[i, j] - dot[i])
            T.copy(tmp, dX[bx * block_M, 0])

    return softmax_bwd
