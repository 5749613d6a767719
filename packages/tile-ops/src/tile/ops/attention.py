"""FlashAttention forward written in tile.lang: ``flash_attention(q, k, v, causal=)``.

One block computes ``block_M`` query rows of one (batch, head). It walks the key/value
sequence in ``block_N`` tiles inside ``T.Pipelined``, keeping an online softmax: the
running row maximum ``scores_max``, the running denominator ``logsum`` and the
unnormalized output ``acc_o``, rescaled by ``exp2((old_max - new_max) * scale)``
whenever the maximum grows. Scores are computed in base 2 (``scale`` folds in
``log2(e)``). The fp32 score tile ``acc_s`` is cast into a fragment of the input type
that is the A operand of the ``P @ V`` gemm.

The kernel body is the op library's forward (``tile.ops._src.flash.forward_body``) read
in this layout, without its log-sum-exp output. Tensors are laid out
``(batch, seq_len, heads, dim)``. A sequence length that is not
a multiple of the blocks is supported: key columns past the end are masked to
``-inf`` and query rows past the end are never stored.

Example::

    >>> import numpy as np
    >>> from tile.ops.attention import flash_attention
    >>> q = np.zeros((1, 5, 1, 16), "float32"); v = np.ones((1, 5, 1, 16), "float32")
    >>> float(flash_attention(q, q, v, target="cpu")[0, 4, 0, 3])
    1.0
"""

from __future__ import annotations

import math
from typing import Any

import tile.lang.language as T

from ._src.configs import Tiling, tiled
from ._src.errors import bad_argument
from ._src.flash import FlashProblem, forward_body
from ._src.runtime import compiled


@tiled(block_M=64, block_N=64, num_stages=1, threads=128)
def flash_attention_kernel(
    batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, dtype: str = "float16",
    accum_dtype: str = "float32", *, tiling: Tiling,
) -> Any:
    """``O = softmax(Q K^T / sqrt(dim) [+ causal mask]) V`` for (batch, seq_len, heads, dim):
    the library's forward kernel body (``tile.ops._src.flash.forward_body``) in this layout,
    without the log-sum-exp output. The tiling is keyword arguments (``block_M=64, ...``) or
    one ``tiling=Tiling(...)``."""
    problem = FlashProblem(
        batch, heads, heads, seq_len, seq_len, dim, is_causal, 1 / math.sqrt(dim), dtype, accum_dtype, tiling
    )
    body = forward_body(problem, seq_major=True)
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def flash_attention(
        Q: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        K: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        V: T.Tensor(shape, dtype),  # type: ignore[valid-type]
        Output: T.Tensor(shape, dtype),  # type: ignore[valid-type]
    ):
        body(Q, K, V, Output, None)

    return flash_attention


def flash_attention(
    q: Any, k: Any, v: Any, causal: bool = False, block: int = 64, target: str = "auto"
) -> Any:
    """Scaled dot-product attention over (batch, seq_len, heads, dim) arrays of one dtype."""
    if len(q.shape) != 4 or tuple(q.shape) != tuple(k.shape) or tuple(q.shape) != tuple(v.shape):
        raise bad_argument(
            "flash_attention",
            "q" if len(q.shape) != 4 else "k" if tuple(q.shape) != tuple(k.shape) else "v",
            f"does not match: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}",
            "q, k, v share one (batch, seq_len, heads, dim) shape here; tile.ops.flash_attention "
            "takes SDPA's layout with grouped heads",
        )
    dtype = str(q.dtype).removeprefix("torch.")
    batch, seq_len, heads, dim = (int(s) for s in q.shape)
    kernel = compiled(
        flash_attention_kernel, (-1,), target, batch, heads, seq_len, dim, bool(causal), dtype,
        block_M=block, block_N=block,
    )
    return kernel(q, k, v)
