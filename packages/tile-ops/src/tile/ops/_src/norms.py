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

from typing import Any

import tile.lang.language as T

from ..norm import rms_norm_rows


def rms_norm_fwd_kernel(
    M: int,
    N: int,
    eps: float,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 16,
    threads: int = 128,
) -> Any:
    """``(X, W) -> (Y, Rstd)`` for X (M, N), W (N,)."""

    @T.prim_func
    def rms_norm_fwd(
        X: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        W: T.Tensor((N,), dtype),  # type: ignore[valid-type]
        Y: T.Tensor((M, N), dtype),  # type: ignore[valid-type]
        Rstd: T.Tensor((M,), accum_dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            sq = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            rstd = T.alloc_fragment((block_M,), accum_dtype)
            rms_norm_rows(X, W, Y, x, sq, w, rstd, bx * block_M, block_M, N, eps)
            T.copy(rstd, Rstd[bx * block_M : (bx + 1) * block_M])

    return rms_norm_fwd


def rms_norm_bwd_kernel(
    M: int,
    N: int,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    rows: int = 16,
    threads: int = 128,
) -> Any:
    """``(dY, X, W, Rstd) -> (dX, dW_partial)``; ``dW = dW_partial.sum(0)``.

    One pass over each row (see the module docstring): ``rows`` rows per block, one at a time.
    """
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
            w = T.alloc_fragment((N,), accum_dtype)
            dw = T.alloc_fragment((N,), accum_dtype)
            x = T.alloc_fragment((N,), accum_dtype)
            g = T.alloc_fragment((N,), accum_dtype)
            gx = T.alloc_fragment((N,), accum_dtype)
            dot = T.alloc_fragment((1,), accum_dtype)
            T.copy(W, w)
            T.clear(dw)
            for r in T.serial(rows):
                row = bx * rows + r
                if row < M:
                    rstd = Rstd[row]
                    T.copy(X[row, :], x)
                    T.copy(dY[row, :], g)
                    for j in T.Parallel(N):
                        dw[j] += g[j] * x[j] * rstd
                        g[j] = g[j] * w[j]
                        gx[j] = g[j] * x[j]
                    T.reduce_sum(gx, dot, dim=0)
                    for j in T.Parallel(N):
                        g[j] = rstd * g[j] - x[j] * (dot[0] * rstd * rstd * rstd / N)
                    T.copy(g, dX[row, :])
            T.copy(dw, dW_partial[bx, :])

    return rms_norm_bwd


def layer_norm_fwd_kernel(
    M: int,
    N: int,
    eps: float,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 16,
    threads: int = 128,
) -> Any:
    """``(X, W, B) -> (Y, Mean, Rstd)`` for X (M, N), W and B (N,)."""

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
            x = T.alloc_fragment((block_M, N), accum_dtype)
            sq = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            b = T.alloc_fragment((N,), accum_dtype)
            mean = T.alloc_fragment((block_M,), accum_dtype)
            rstd = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            T.copy(W, w)
            T.copy(B, b)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mean[i]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_M):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * rstd[i] * w[j] + b[j]
            T.copy(x, Y[bx * block_M, 0])
            T.copy(mean, Mean[bx * block_M : (bx + 1) * block_M])
            T.copy(rstd, Rstd[bx * block_M : (bx + 1) * block_M])

    return layer_norm_fwd


def layer_norm_bwd_kernel(
    M: int,
    N: int,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    rows: int = 16,
    threads: int = 128,
) -> Any:
    """``(dY, X, W, Mean, Rstd) -> (dX, dW_partial, dB_partial)``; sum the partials over rows.

    One pass over each row (see the module docstring): ``rows`` rows per block, one at a time.
    """
    blocks = (M + rows - 1) // rows

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
            T.clear(db)
            for r in T.serial(rows):
                row = bx * rows + r
                if row < M:
                    mean = Mean[row]
                    rstd = Rstd[row]
                    T.copy(X[row, :], xhat)
                    T.copy(dY[row, :], g)
                    for j in T.Parallel(N):
                        xhat[j] = (xhat[j] - mean) * rstd
                        dw[j] += g[j] * xhat[j]
                        db[j] += g[j]
                        g[j] = g[j] * w[j]
                        gx[j] = g[j] * xhat[j]
                    T.reduce_sum(g, sum_g, dim=0)
                    T.reduce_sum(gx, sum_gx, dim=0)
                    for j in T.Parallel(N):
                        g[j] = rstd * (g[j] - sum_g[0] / N - xhat[j] * (sum_gx[0] / N))
                    T.copy(g, dX[row, :])
            T.copy(dw, dW_partial[bx, :])
            T.copy(db, dB_partial[bx, :])

    return layer_norm_bwd


def softmax_bwd_kernel(
    M: int,
    N: int,
    dtype: str = "float32",
    accum_dtype: str = "float32",
    block_M: int = 16,
    threads: int = 128,
) -> Any:
    """``(dY, Y) -> dX`` of the row softmax: ``dX = Y * (dY - sum_j dY * Y)``."""

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
