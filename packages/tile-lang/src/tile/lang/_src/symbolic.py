"""Symbolic dimensions: ``T.dynamic("M")`` / ``T.symbolic("M")``.

A symbolic dim is an integer variable that may appear in tensor shapes, grid
extents (``T.Kernel(T.ceildiv(M, 64))``), loop bounds and index expressions. The
kernel is compiled once; each call binds the variable from the shape of the first
tensor argument that has it as a dimension (the generated entry checks that every
other use agrees). Outputs listed in ``out_idx`` take their shape from the bound
values.

Example::

    M = T.dynamic("M")

    @T.prim_func
    def scale(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            ...
"""

from __future__ import annotations

from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from ..errors import TileTypeError
from .dtypes import dtype_name


def dynamic(name: str, dtype: Any = "int32") -> Any:
    """A symbolic integer dim named ``name``, bound from argument shapes at call time."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TileTypeError(
            f"T.dynamic needs a dim name that is a Python identifier, got {name!r}",
            hint='write M = T.dynamic("M")',
        )
    dt = dtype_name(dtype)
    if not dt.startswith(("int", "uint")):
        raise TileTypeError(f"a symbolic dim must have an integer dtype, got {dt}", hint='use "int32"')
    return tirx.Var(name, dt)


def symbolic(name: str, dtype: Any = "int32") -> Any:
    """Same as ``T.dynamic``: a symbolic integer dim bound from argument shapes."""
    return dynamic(name, dtype)


def split_names(names: str) -> list[str]:
    """``"M, N,K"`` -> ``["M", "N", "K"]`` (the spelling ``T.const`` accepts)."""
    parts = [p.strip() for p in names.replace(" ", ",").split(",")]
    result = [p for p in parts if p]
    for part in result:
        if not part.isidentifier():
            raise TileTypeError(f"{part!r} is not a valid dim name", hint='write T.const("M, N, K")')
    return result
