"""Scalar variables, macros and plain loops inside kernels.

``T.alloc_var(dtype, init=)`` is a mutable scalar: read it in expressions, assign it
with ``x = ...`` or ``x += ...`` (the parser stores into its one-element buffer).
``T.macro`` inlines a Python function's body at each call while the kernel is
parsed; its arguments may be buffers, slices, expressions or Python values.
``T.serial(start, stop, step)`` is a sequential loop; Python ``for ... in range``,
``while`` and ``if``/``else`` work in kernels too.

Example::

    @T.macro
    def scale_row(dst, src, row, n):
        for j in T.Parallel(n):
            dst[row, j] = src[row, j] * 2.0

    with T.Kernel(1, threads=128) as bx:
        count = T.alloc_var("int32", init=0)
        while count < 4:
            scale_row(B, A, count, 64)
            count += 1
"""

from __future__ import annotations

from typing import Any

from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from ..errors import TileScopeError
from .dtypes import dtype_name
from .session import current_session

VAR_SCOPE = "local"
"""Scope of ``T.alloc_var`` storage: one register-like slot per block (per thread on GPUs)."""


def alloc_var(dtype: Any = "int32", init: Any = None, scope: str = VAR_SCOPE) -> Any:
    """A mutable scalar of ``dtype``, optionally set to ``init``."""
    session = current_session("T.alloc_var")
    if not session.kernels:
        raise TileScopeError(
            "T.alloc_var can only be used inside a `with T.Kernel(...)` block",
            hint="scalar variables live in a kernel's blocks",
        )
    scalar = B.alloc_scalar(dtype=dtype_name(dtype), scope=scope)
    if init is not None:
        B.buffer_store(scalar.scalar.source, init, [0])
    return scalar


def serial(start: Any, stop: Any = None, step: Any = None, **kwargs: Any) -> Any:
    """``for i in T.serial(n)`` or ``T.serial(start, stop[, step])``: a sequential loop."""
    if step is not None:
        kwargs["step"] = step
    return B.serial(start, stop, **kwargs)


macro = _script.macro
"""``@T.macro``: a function whose body is inlined into the kernel at each call."""
