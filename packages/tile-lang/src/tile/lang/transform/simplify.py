"""TileLang's ``tilelang.transform.simplify`` names: ``apply_simplify``, ``simplify_prim_func``.

TileLang simplifies a kernel and drops the tensor parameters its body never uses (a
``Bias`` tensor that a ``with_bias=False`` build leaves out), so the kernel is then called
without them. Both names here do that second part: ``apply_simplify(kernel)`` returns the
kernel without its unused tensor parameters, and ``@simplify_prim_func`` does the same to
what the decorated function returns. Scalar parameters stay, and so does a tensor whose
symbolic dims are needed by the kernel and given by no other parameter. Folding constants
and simplifying loop bounds and tile regions is what tile's compiler does to every kernel
it compiles (the ``normalize`` pass of ``tile.ir.transform``), so it is not repeated here.

Example::

    @T.prim_func
    def kernel(A: T.Tensor((n,), "float32"), Bias: T.Tensor((n,), "float32"),
               C: T.Tensor((n,), "float32")):
        ...  # reads A, writes C, never touches Bias

    apply_simplify(kernel)  # a kernel of (A, C)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["apply_simplify", "simplify_prim_func"]


def _contains(found: list[Any], var: Any) -> bool:
    return any(var.same_as(f) for f in found)


def _dim_vars(param: Any) -> list[Any]:
    from tvm import tirx  # type: ignore[import-untyped]

    found: list[Any] = []
    for dim in [*param.shape, *param.strides]:
        for var in tirx.analysis.undefined_vars(dim, []):
            if not _contains(found, var):
                found.append(var)
    return found


def _without_unused_tensors(func: Any) -> Any:
    from tvm import tirx  # type: ignore[import-untyped]

    from .._src.session import SCRATCH_PARAMS

    attrs = func.attrs if func.attrs is not None else {}
    scratch = int(attrs[SCRATCH_PARAMS]) if SCRATCH_PARAMS in attrs else 0
    params = list(func.params)
    visible = params[: len(params) - scratch]  # T.alloc_global scratch: allocated per call, kept
    used = list(tirx.analysis.undefined_vars(func.body, []))
    unused = [p for p in visible if tirx.is_buffer_var(p) and not _contains(used, p)]
    if not unused:
        return func
    kept = [p for p in params if not _contains(unused, p)]
    # a dropped tensor may be the only definition of a symbolic dim the kernel uses
    defined = [v for p in kept for v in ([p] if not tirx.is_buffer_var(p) else _dim_vars(p))]
    needed = [
        p for p in unused if any(_contains(used, v) and not _contains(defined, v) for v in _dim_vars(p))
    ]
    if len(needed) == len(unused):
        return func
    drop = [p for p in unused if not _contains(needed, p)]
    new = tirx.PrimFunc([p for p in params if not _contains(drop, p)], func.body, func.ret_type, func.attrs)
    if hasattr(func, "__name__"):
        new.__name__ = func.__name__
    return new


def apply_simplify(stmt: Any, inline_let: bool = False) -> Any:
    """``stmt`` (a ``@T.prim_func`` kernel, or an ``IRModule`` of one) without the tensor
    parameters its body never uses. ``inline_let`` is TileLang's option; tile's compiler
    inlines and simplifies when it compiles, so it changes nothing here."""
    del inline_let
    from tvm import ir, tirx  # type: ignore[import-untyped]

    if isinstance(stmt, ir.IRModule):
        functions = list(stmt.functions.values())
        if len(functions) != 1 or not isinstance(functions[0], tirx.PrimFunc):
            raise TypeError(f"apply_simplify takes a module of one kernel, got {len(functions)} functions")
        return _without_unused_tensors(functions[0])
    if isinstance(stmt, tirx.PrimFunc):
        return _without_unused_tensors(stmt)
    raise TypeError(f"apply_simplify takes a @T.prim_func kernel or an IRModule, got {type(stmt).__name__}")


def simplify_prim_func(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a function that builds a kernel: the kernel it returns goes through
    ``apply_simplify`` (its unused tensor parameters dropped)."""

    @functools.wraps(func)
    def build(*args: Any, **kwargs: Any) -> Any:
        return apply_simplify(func(*args, **kwargs))

    return build
