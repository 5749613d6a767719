"""Where an element of a TIR buffer lies: its offset in elements from the buffer's start.

A buffer declared with strides (a ``T.StridedTensor`` parameter: a transposed, sliced or
padded view) places ``buffer[i, j]`` at ``i * s0 + j * s1``; one without is row-major over
its shape. Passes that prove alignment or contiguity of an access (vectorized loads, cp.async)
reason about this offset, never about the shape alone.

Example::

    >>> from tvm import tirx
    >>> s = tirx.Var("s", "int32")
    >>> view = tirx.decl_buffer((4, 8), "float32", "A", strides=[s, 1])
    >>> str(flat_offset(view, [tirx.const(1, "int32"), tirx.const(2, "int32")]))
    's + 2'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import tirx


def element_strides(buffer: Any) -> list[Any]:
    """The buffer's element strides: its declared ones, else the row-major ones of its shape."""
    if len(buffer.strides):
        return list(buffer.strides)
    strides: list[Any] = []
    run: Any = tirx.const(1, "int32")
    for extent in reversed(list(buffer.shape)):
        strides.insert(0, run)
        run = run * extent
    return strides


def flat_offset(buffer: Any, indices: Sequence[Any]) -> Any:
    """The offset in elements of ``buffer[indices]`` from the buffer's first element."""
    flat: Any = tirx.const(0, "int32")
    for index, stride in zip(indices, element_strides(buffer), strict=True):
        flat = flat + index * stride
    return tvm.sym.Analyzer().simplify(flat)


def unit_inner_stride(buffer: Any) -> bool:
    """Whether consecutive elements of the buffer's last dim are adjacent in memory (always, unless
    declared strides give the last dim a stride other than a provable 1)."""
    if not len(buffer.strides):
        return True
    last = buffer.strides[-1]
    return isinstance(last, tirx.IntImm) and int(last.value) == 1


__all__ = ["element_strides", "flat_offset", "unit_inner_stride"]
