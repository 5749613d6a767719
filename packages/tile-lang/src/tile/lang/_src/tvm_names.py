"""The ``tvm.tirx`` type names TileLang's programs use that apache-tvm 0.27 spells elsewhere.

TileLang's bundled TVM has ``tirx.PrimExpr`` and ``tirx.Call``; apache-tvm 0.27 has one
expression base class, ``tvm.ir.Expr``, and one call node, ``tvm.ir.Call``. Programs use
these names in annotations and ``isinstance`` checks of their dequantization helpers
(``def f(val: tirx.PrimExpr, ...)``), evaluated when the helper is defined, and read
``val.dtype`` where apache-tvm has ``val.ty``; their tests read a kernel's parameter buffers
as ``func.buffer_map[func.params[i]]``, where apache-tvm's parameters are the buffers. Importing
``tile.lang`` adds each name to ``tvm.tirx`` where it is missing, bound to the class that
plays its part; nothing apache-tvm defines is replaced.
"""

from __future__ import annotations

from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

ALIASES = {"PrimExpr": ir.Expr, "Call": ir.Call}


def _expr_dtype(expr: Any) -> str:
    """``expr.dtype``: the name of the expression's element type (``expr.ty``)."""
    return str(expr.ty)


def _buffer_map(func: Any) -> dict[Any, Any]:
    """``func.buffer_map``: each buffer parameter, keyed by itself (apache-tvm 0.27's parameters
    are the buffers; TileLang's TVM keys them by a handle parameter)."""
    return {param: param for param in func.params if tirx.is_buffer_var(param)}


def add_tirx_aliases() -> None:
    """Bind the names of ``ALIASES`` in ``tvm.tirx`` where apache-tvm lacks them, and give
    expressions TileLang's ``expr.dtype`` (their helpers read ``val.dtype``; apache-tvm 0.27
    spells it ``val.ty``) where no expression class has it, and kernels ``func.buffer_map``."""
    for name, cls in ALIASES.items():
        if not hasattr(tirx, name):
            setattr(tirx, name, cls)
    if not hasattr(ir.Expr, "dtype"):
        ir.Expr.dtype = property(_expr_dtype)
    if not hasattr(tirx.PrimFunc, "buffer_map"):
        tirx.PrimFunc.buffer_map = property(_buffer_map)
