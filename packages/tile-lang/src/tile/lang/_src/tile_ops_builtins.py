"""Builtins for the scan and atomic tile operators (``T.cumsum``, ``T.cummax``, ``T.atomic_*``).

Like ``builtins.py``, each function runs while TVMScript parses a kernel and emits
the operator as an ``Evaluate(Call(tile.<op>))`` statement.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]

from tile.ir.ops import Atomic, Cumsum

from ..errors import TileTypeError
from .builtins import _emit, _kernel
from .naming import named
from .session import record_thread_atomic


def cumsum(
    src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: Any = None
) -> None:
    """Inclusive prefix sum of ``src`` along ``dim`` into ``dst`` (``src`` itself by default).

    With ``reverse=True`` each element is the sum of itself and everything after it.
    ``annotations`` (TileLang's per-op hints) are accepted and have no effect.

    Example::

        T.cumsum(A_shared, dim=1)             # in place, along rows
        T.cumsum(A_frag, B_frag, reverse=True)
    """
    _kernel("T.cumsum")
    _emit(Cumsum.build(src, dst, dim, reverse))


def cummax(
    src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: Any = None
) -> None:
    """Inclusive running maximum of ``src`` along ``dim`` into ``dst`` (``src`` itself by
    default); ``reverse=True`` runs from the end. The scan of ``T.cumsum`` with ``max`` for
    ``+``: shared tiles and fragments, rows split over lanes and combined with shuffles on
    GPUs. ``annotations`` are accepted and have no effect.

    Example::

        T.cummax(A_shared, dim=1)
        T.cummax(A_frag, B_frag, dim=0, reverse=True)
    """
    _kernel("T.cummax")
    _emit(Cumsum.build(src, dst, dim, reverse, kind="max"))


_FETCH_EXTREME_DTYPES = ("int32", "uint32", "float32", "float16", "bfloat16")
"""Element types with a value-returning ``tile::atomic_max/min`` on every GPU vendor."""


def fetch_and(kind: str, dst: Any, value: Any, name: str | None = None) -> Any:
    """``T.atomic_<kind>(A[i], v, return_prev=True)``: this thread's update of one element, whose
    value is the element before it (``tile::atomic_add/max/min`` of the GPU device headers, which
    return it; float max/min by compare-and-swap). The CPU backend refuses the kernel at the
    line (``record_thread_atomic``): its blocks have no threads that could fetch one by one."""
    name = name or f"T.atomic_{kind}"
    if not isinstance(dst, TensorLoad):
        raise TileTypeError(
            f"{name}(..., return_prev=True) takes one element, got {type(dst).__name__}",
            hint=f"write old = {name}(A[i], v, return_prev=True) in a T.Parallel loop",
        )
    dtype = str(dst.ty)
    if kind != "add" and dtype not in _FETCH_EXTREME_DTYPES:
        raise TileTypeError(
            f"{name}(..., return_prev=True) on {dtype}: GPUs fetch the old value of a max or "
            f"min for {', '.join(_FETCH_EXTREME_DTYPES)} only",
            hint="use a buffer of one of those element types, or drop return_prev",
        )
    record_thread_atomic(name)
    return tirx.call_extern(dtype, f"tile::atomic_{kind}", tirx.address_of(dst), tirx.Cast(dtype, value))


def _atomic(kind: str) -> Any:
    def atomic(dst: Any, value: Any, return_prev: bool = False, **_options: Any) -> Any:
        # memory_order= is accepted and needs nothing: a CPU kernel with global atomics is serial
        _kernel(f"T.atomic_{kind}")
        if return_prev:
            return fetch_and(kind, dst, value)
        _emit(Atomic.build(kind, dst, value))
        return None

    return named(
        atomic,
        f"atomic_{kind}",
        (
            f"Atomically ``dst = {kind}(dst, value)``, safe when other blocks update ``dst`` too.\n\n"
            f"Scalar form: ``T.atomic_{kind}(C[i, j], v)``.\n"
            f"Region form: ``T.atomic_{kind}(C[i0, j0], C_local)`` (or a slice or whole buffer as\n"
            "destination) updates a tile element-wise. On the CPU, a\n"
            "kernel with atomics on global memory runs its blocks one after another.\n"
        ),
    )


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
