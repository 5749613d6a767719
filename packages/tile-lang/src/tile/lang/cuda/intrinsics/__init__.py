"""``tile.lang.cuda.intrinsics``: the layout helpers TileLang programs use beside hand-written MMA code.

``make_mma_swizzle_layout(buffer)`` is the shared-memory swizzle ``T.annotate_layout``
takes for an ``ldmatrix``/``mma`` operand tile: tile's hardware XOR swizzle, the widest
span (32/64/128 bytes) the rows fill, row-major where none fits or ``is_smooth``.
``get_mma_micro_size(dtype)`` is the ``(m, n, k)`` of one ``mma.sync`` tile for the
operand dtype (gpu-isa-facts: m16n8k16 for 16-bit operands, k32 for 8-bit ones; TileLang
reports n as 16, a pair of n8 instructions). TileLang's MMA macro emitters
(``TensorCoreIntrinEmitter``) are not provided: ``T.gemm`` on fragments is tile's way.
"""

from __future__ import annotations

from typing import Any

from tile.layout import Layout
from tile.layout.swizzle import make_row_major_layout, make_swizzled_layout

EIGHT_BIT_OPERANDS = frozenset({"int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"})


def make_mma_swizzle_layout(shared_buf: Any, is_smooth: bool = False) -> Layout:
    """The swizzled layout of a shared-memory MMA operand tile (row-major when ``is_smooth``).

    Example::

        T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared)})
    """
    if is_smooth:
        return make_row_major_layout(list(shared_buf.shape))
    return make_swizzled_layout(shared_buf)


def get_mma_micro_size(dtype: str) -> tuple[int, int, int]:
    """``(micro_m, micro_n, micro_k)`` of the tensor-core tile for operands of ``dtype``.

    Example::

        >>> get_mma_micro_size("float16"), get_mma_micro_size("int8")
        ((16, 16, 16), (16, 16, 32))
    """
    return (16, 16, 32 if str(dtype) in EIGHT_BIT_OPERANDS else 16)


make_swizzle_layout = make_mma_swizzle_layout
"""TileLang's other spelling (``from ... import make_mma_swizzle_layout as make_swizzle_layout``)."""

__all__ = ["get_mma_micro_size", "make_mma_swizzle_layout", "make_swizzle_layout"]
