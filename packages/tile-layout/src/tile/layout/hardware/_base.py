"""The small base fragments every hardware fragment is grown from (paper Fig. 6).

A warp-level 8-row matrix of 16 bytes per row, as ldmatrix delivers it: lane
``4 * row + col // k`` holds ``k = 32 / element_bits`` consecutive elements of one
row in one 32-bit register. Its transpose serves the K-major operands (B).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..errors import LayoutError
from ..fragment import Fragment
from ..swizzle import dtype_bits

LANES_PER_ROW = 4
"""Four lanes share one 16-byte row (PTX: "a group of four threads loads an entire row")."""


def per_register(dtype: int | str) -> int:
    """Elements of ``dtype`` packed in one 32-bit register."""
    bits = dtype_bits(dtype)
    if bits > 32:
        raise LayoutError(f"{bits}-bit elements do not fit a 32-bit register", hint="use <= 32-bit types")
    return 32 // bits


def row_fragment(dtype: int | str) -> Fragment:
    """8 rows x 16 bytes: lane ``4r + c // k``, local ``c % k`` (k elements per register)."""
    k = per_register(dtype)
    return Fragment([8, LANES_PER_ROW * k], forward_fn=lambda r, c: (r * LANES_PER_ROW + c // k, c % k))


def col_fragment(dtype: int | str) -> Fragment:
    """The transpose of :func:`row_fragment`: ``(16 bytes, 8)``; lane ``4c + r // k``."""
    k = per_register(dtype)
    return Fragment([LANES_PER_ROW * k, 8], forward_fn=lambda r, c: (c * LANES_PER_ROW + r // k, r % k))


def lane_fragment(rows: int, cols: int, *, lane_dim: int) -> Fragment:
    """``rows x cols`` with the ``lane_dim`` coordinate as lane and the other as local.

    The AMD MFMA operands are built from it: every lane holds a short run along K
    (or along M for accumulators) in consecutive registers.
    """
    if lane_dim == 0:
        return Fragment([rows, cols], forward_fn=lambda r, c: (r, c))
    return Fragment([rows, cols], forward_fn=lambda r, c: (c, r))


OperandBuilder = Callable[..., Fragment]
"""``build(dtype=<the instruction's default>) -> Fragment``: one operand of one instruction."""


def operand_builders(
    name: str,
    default_dtype: str,
    build: Callable[[Literal["A", "B"], int | str], Fragment],
    docs: tuple[str, str],
) -> tuple[OperandBuilder, OperandBuilder]:
    """The builders ``{name}_a`` and ``{name}_b`` of one instruction's A and B operands.

    Each takes the input ``dtype`` (``default_dtype`` when omitted) and returns
    ``build("A" or "B", dtype)``; ``docs`` are their docstrings. The hardware modules
    state their instructions as a table and make the public builders with this.
    """

    def a(dtype: int | str = default_dtype) -> Fragment:
        return build("A", dtype)

    def b(dtype: int | str = default_dtype) -> Fragment:
        return build("B", dtype)

    for fn, operand, doc in ((a, "a", docs[0]), (b, "b", docs[1])):
        fn.__name__ = fn.__qualname__ = f"{name}_{operand}"
        fn.__doc__ = doc
    return a, b
