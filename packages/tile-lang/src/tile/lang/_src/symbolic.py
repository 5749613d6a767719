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

from collections.abc import Sequence
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]

from ..errors import TileTypeError
from .dtypes import dtype_name


def dynamic(name: str, dtype: Any = "int32") -> Any:
    """A symbolic integer dim named ``name``, bound from argument shapes at call time; several
    names at once give a tuple, as in TileLang: ``S, B = T.dynamic("S, B")``."""
    if isinstance(name, str) and "," in name:
        return tuple(dynamic(part.strip(), dtype) for part in name.split(","))
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


def _linear(expr: Any, var: Any) -> tuple[int, int] | None:
    """``(a, b)`` with ``expr == a * var + b``, for sums, differences and integer multiples of
    ``var``; ``None`` for anything else (another variable, a product of ``var`` with itself)."""
    if isinstance(expr, tirx.IntImm):
        return 0, int(expr.value)
    if isinstance(expr, tirx.Var):
        return (1, 0) if expr.same_as(var) else None
    if isinstance(expr, tirx.Cast):
        return _linear(expr.value, var)
    if isinstance(expr, tirx.Add | tirx.Sub | tirx.Mul):
        left, right = _linear(expr.a, var), _linear(expr.b, var)
        if left is None or right is None:
            return None
        if isinstance(expr, tirx.Mul):
            if left[0] and right[0]:
                return None
            return left[0] * right[1] + right[0] * left[1], left[1] * right[1]
        sign = 1 if isinstance(expr, tirx.Add) else -1
        return left[0] + sign * right[0], left[1] + sign * right[1]
    return None


def _free_vars(expr: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(
        expr, [(tirx.Var, lambda v: found.append(v) if not any(v.same_as(f) for f in found) else None)]
    )
    return found


def bind_shape_expressions(func: Any, outputs: Sequence[int] = ()) -> Any:
    """Solve symbolic dims that appear only inside shape expressions (TileLang's
    ``A: T.Tensor((n * 4,), dtype)``): the first such dim, linear in ``n``, becomes a dim of its
    own, ``n`` is defined from it as ``(dim - b) // a`` wherever it appears, and the kernel checks
    that the dim is ``a * n + b`` for a whole ``n >= 0``. Kernels whose every symbolic dim is a
    dim of some input tensor (or a scalar parameter) are returned as they are; the parameters
    at ``outputs`` are allocated by the call, so their dims bind nothing."""
    params = list(func.params)
    bound: list[Any] = [p for p in params if not tirx.is_buffer_var(p)]
    for index, p in enumerate(params):
        if tirx.is_buffer_var(p) and index not in outputs:
            bound += [d for d in [*p.shape, *p.strides] if isinstance(d, tirx.Var)]
    solved: list[tuple[Any, Any]] = []  # (n, its definition from the new dim)
    checks: list[tuple[Any, str]] = []
    shapes = {index: list(p.shape) for index, p in enumerate(params) if tirx.is_buffer_var(p)}
    for index, shape in shapes.items():
        for axis, dim in enumerate(shape):
            if isinstance(dim, tirx.Var | tirx.IntImm):
                continue
            known = bound + [n for n, _ in solved]
            free = [v for v in _free_vars(dim) if not any(v.same_as(k) for k in known)]
            coefficients = _linear(dim, free[0]) if len(free) == 1 else None
            if coefficients is None or coefficients[0] <= 0:
                continue
            a, b = coefficients
            name = str(params[index].name)
            extent = tirx.Var(f"{name}_shape_{axis}", dim.dtype)
            solved.append((free[0], tirx.floordiv(extent - b, a)))
            checks.append(
                (
                    tirx.all(extent >= b, tirx.floormod(extent - b, a) == 0),
                    f"dim {axis} of {name} must be {dim} for a whole {free[0]} >= 0",
                )
            )
            shape[axis] = extent
    if not solved:
        return func

    def substitute(node: Any) -> Any:
        def one(v: Any) -> Any:
            return next((value for n, value in solved if v.same_as(n)), v)

        return tvm_ffi.structural_map(node, (tirx.Var, one)) if isinstance(node, ir.Expr) else node

    replaced: dict[int, Any] = {}
    new_params = []
    for index, p in enumerate(params):
        if index not in shapes:
            new_params.append(p)
            continue
        ty = p.ty
        fresh = tirx.decl_buffer(
            [substitute(d) for d in shapes[index]],
            ty.dtype,
            name=str(p.name),
            strides=[substitute(s) for s in ty.strides] or None,
            elem_offset=ty.elem_offset,
            scope=ty.storage_scope,
            data_alignment=ty.data_alignment,
            offset_factor=ty.offset_factor,
        )
        replaced[index] = fresh
        new_params.append(fresh)

    def rename(v: Any) -> Any:
        for index, fresh in replaced.items():
            if v.same_as(params[index]):
                return fresh
        return next((value for n, value in solved if v.same_as(n)), v)

    body = tvm_ffi.structural_map(func.body, (tirx.Var, rename))
    asserts = [
        tirx.AssertStmt(cond, ir.StringImm("ValueError"), [ir.StringImm(text)]) for cond, text in checks
    ]
    new = tirx.PrimFunc(new_params, tirx.SeqStmt([*asserts, body]), func.ret_type, func.attrs)
    if hasattr(func, "__name__"):
        new.__name__ = func.__name__
    return new
