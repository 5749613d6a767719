"""numpy references that the tests of several packages compare kernels against."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def attention(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """softmax(Q K^T / sqrt(d)) V in float32 for ``[batch, seq, heads, dim]`` numpy arrays;
    ``causal`` masks every key after the query's position.

    Example::

        >>> x = np.ones((1, 2, 1, 4), np.float16)
        >>> attention(x, x, x, causal=True).shape
        (1, 2, 1, 4)
    """
    qf, kf, vf = (t.astype(np.float32).transpose(0, 2, 1, 3) for t in (q, k, v))
    s = qf @ kf.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((p / p.sum(axis=-1, keepdims=True)) @ vf).transpose(0, 2, 1, 3)
