"""The ``tvm.tirx`` type names TileLang's programs use that apache-tvm 0.27 spells elsewhere.

TileLang's bundled TVM has ``tirx.PrimExpr`` and ``tirx.Call``; apache-tvm 0.27 has one
expression base class, ``tvm.ir.Expr``, and one call node, ``tvm.ir.Call``. Programs use
these names in annotations and ``isinstance`` checks of their dequantization helpers
(``def f(val: tirx.PrimExpr, ...)``), evaluated when the helper is defined. Importing
``tile.lang`` adds each name to ``tvm.tirx`` where it is missing, bound to the class that
plays its part; nothing apache-tvm defines is replaced.
"""

from __future__ import annotations

from tvm import ir, tirx  # type: ignore[import-untyped]

ALIASES = {"PrimExpr": ir.Expr, "Call": ir.Call}


def add_tirx_aliases() -> None:
    """Bind the names of ``ALIASES`` in ``tvm.tirx`` where apache-tvm lacks them."""
    for name, cls in ALIASES.items():
        if not hasattr(tirx, name):
            setattr(tirx, name, cls)
