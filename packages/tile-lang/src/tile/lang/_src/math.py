"""Integer helpers TileLang programs call on the host (``tilelang.cdiv``, ...)."""

from __future__ import annotations

from typing import Any


def cdiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for non-negative integers (also for TIR expressions).

    Example::

        >>> cdiv(10, 4)
        3
    """
    return (a + b - 1) // b


def next_power_of_2(n: int) -> int:
    """The smallest power of two ``>= n`` (1 for ``n <= 1``).

    Example::

        >>> next_power_of_2(33)
        64
    """
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()
