"""A small typed wall around apache-tvm's symbolic arithmetic.

apache-tvm ships no type stubs, so every tvm object is ``Any`` to mypy. This module is
the only place that imports tvm for the layout package; the rest of the package uses
the aliases and helpers below, which keeps the untyped surface in one file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm import sym as _sym

PrimExpr: TypeAlias = Any
"""A ``tvm`` integer expression (``tvm.ir.Expr``); tvm has no stubs."""

Var: TypeAlias = Any
"""A ``tvm.tirx.Var`` of dtype int32."""

Analyzer: TypeAlias = Any
"""A ``tvm.sym.Analyzer``."""

IndexMap = tirx.IndexMap
floordiv = tirx.floordiv
floormod = tirx.floormod
bitwise_xor = tirx.bitwise_xor
bitwise_and = tirx.bitwise_and
shift_right = tirx.shift_right
shift_left = tirx.shift_left
Select = tirx.Select
logical_and = tirx.all
TVMError: tuple[type[Exception], ...] = (RuntimeError, ValueError, TypeError, IndexError)
"""What tvm raises when an analysis gives up (InternalError is a RuntimeError)."""

__all__ = [
    "Analyzer",
    "IndexMap",
    "PrimExpr",
    "Var",
    "analyzer_for",
    "as_expr",
    "as_int",
    "bitwise_and",
    "bitwise_xor",
    "const",
    "floordiv",
    "floormod",
    "free_vars",
    "is_prim_expr",
    "make_var",
    "substitute",
]


def make_var(name: str) -> Var:
    """A fresh int32 variable."""
    return tirx.Var(name, "int32")


def const(value: int) -> PrimExpr:
    """An int32 constant."""
    return tirx.const(int(value), "int32")


def is_prim_expr(value: object) -> bool:
    """Whether ``value`` is a tvm expression (not a Python int)."""
    return isinstance(value, ir.Expr)


def as_expr(value: object) -> PrimExpr:
    """Coerce a Python int (or numpy integer) or a PrimExpr to a PrimExpr."""
    if isinstance(value, ir.Expr):
        return value
    if isinstance(value, bool):
        return tirx.const(value, "bool")
    try:
        return const(int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"expected an int or a tvm PrimExpr, got {value!r}") from exc


def as_int(value: object) -> int | None:
    """The Python int of a constant expression, or None when it is symbolic."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    if hasattr(value, "__index__") and not isinstance(value, ir.Expr):
        return int(value.__index__())
    return None


def analyzer_for(ranges: Iterable[tuple[Var, PrimExpr]]) -> Analyzer:
    """An analyzer with each var bound to ``[0, extent)``."""
    ana = _sym.Analyzer()
    for var, extent in ranges:
        ana.bind(var, ir.Range(0, extent))
    return ana


def iter_ranges(ranges: Iterable[tuple[Var, PrimExpr]]) -> dict[Var, Any]:
    """The ``{var: Range(0, extent)}`` dict that tvm's iter-map functions take."""
    return {var: ir.Range(0, extent) for var, extent in ranges}


def detect_iter_map(
    indices: Sequence[PrimExpr], ranges: Iterable[tuple[Var, PrimExpr]], *, bijective: bool
) -> list[Any] | None:
    """``tvm.sym.detect_iter_map``; the IterSumExprs, or None when not affine."""
    level = "bijective" if bijective else "surjective"
    try:
        res = _sym.detect_iter_map(list(indices), iter_ranges(ranges), check_level=level)
    except TVMError:
        return None
    if len(res.indices) == 0 or len(res.errors) != 0:
        return None
    return list(res.indices)


def split_terms(
    expr: PrimExpr, ranges: Iterable[tuple[Var, PrimExpr]]
) -> list[tuple[PrimExpr, int, int]] | None:
    """``expr`` as ``base + sum(piece * scale)``: the ``(piece, extent, scale)`` terms.

    Every piece is a split ``(x // f) % e`` of an input (or of a fused sum of inputs)
    with values in ``[0, extent)``. None when ``expr`` is not such a sum with constant
    extents and scales.
    """
    try:
        total = _sym.normalize_to_iter_sum(expr, iter_ranges(ranges))
    except TVMError:
        return None
    if as_int(total.base) is None:
        return None
    terms: list[tuple[PrimExpr, int, int]] = []
    for split in total.args:
        extent, scale = as_int(split.extent), as_int(split.scale)
        if extent is None or scale is None:
            return None
        unit = _sym.IterSplitExpr(split.source, split.lower_factor, split.extent, const(1))
        terms.append((_sym.normalize_iter_map_to_expr(unit), extent, scale))
    return terms


def substitute(expr: PrimExpr, mapping: Mapping[Var, PrimExpr]) -> PrimExpr:
    """Replace variables in ``expr`` (a copy; the input is untouched)."""
    if not mapping:
        return expr
    table = dict(mapping)
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: table.get(v, v)))


def free_vars(expr: PrimExpr) -> list[Var]:
    """The distinct variables that occur in ``expr``, in first-seen order."""
    seen: list[Var] = []
    ids: set[Any] = set()

    def visit(v: Var) -> None:
        if v not in ids:
            ids.add(v)
            seen.append(v)

    tvm_ffi.structural_walk(expr, (tirx.Var, visit))
    return seen


def expr_types() -> dict[str, type]:
    """The tvm node classes the numpy evaluator dispatches on."""
    names = [
        "Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Div", "Mod", "Min", "Max",
        "BitwiseXor", "BitwiseAnd", "BitwiseOr", "BitwiseNot", "LShift", "RShift",
        "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not", "Select", "Cast", "Var",
    ]  # fmt: skip
    return {name: getattr(tirx, name) for name in names} | {"IntImm": tirx.IntImm}


def linear_coefficients(expr: PrimExpr, variables: Sequence[Var]) -> list[int] | None:
    """``[c_0, ..., c_n-1, base]`` with ``expr == sum(c_i * v_i) + base``, all constant ints.

    None when ``expr`` is not linear in ``variables`` with constant coefficients.
    """
    try:
        coeffs = _sym.detect_linear_equation(expr, list(variables))
    except TVMError:
        return None
    if len(coeffs) != len(variables) + 1:
        return None
    ints = [as_int(_sym.Analyzer().simplify(c)) for c in coeffs]
    if any(c is None for c in ints):
        return None
    return [int(c) for c in ints if c is not None]


def divisors_of(expr: PrimExpr, var: Var) -> int:
    """The lcm of the constant divisors of ``//`` and ``%`` nodes whose dividend reads ``var``."""
    found = [1]

    def visit(node: Any) -> None:
        divisor = as_int(node.b)
        if divisor is not None and divisor > 1 and any(v.same_as(var) for v in free_vars(node.a)):
            found.append(divisor)

    tvm_ffi.structural_walk(expr, (tirx.FloorDiv, visit))
    tvm_ffi.structural_walk(expr, (tirx.FloorMod, visit))
    return math.lcm(*found)


def rep_splits(
    expr: PrimExpr, ranges: Iterable[tuple[Var, PrimExpr]], var: Var
) -> list[tuple[int, int]] | None:
    """The ``(lower_factor, extent)`` pieces of ``var`` that ``expr`` reads.

    ``expr`` is parsed as an iterator map; a piece ``(f, e)`` stands for
    ``(var // f) % e``. None when ``expr`` is not affine or a piece is symbolic.

    TVM's iterator maps only split a var whose extent the divisors divide, so
    ``var % 16`` with ``var < 333`` is parsed over ``var < 336``. That parse stands for
    the real range when every combination of the pieces is reached by some
    ``var < 333``: its smallest representative ``sum(digit * f)`` is below the extent.
    """
    ranges = list(ranges)
    found = _rep_splits(expr, ranges, var)
    if found is not None:
        return found
    extent = next((as_int(e) for v, e in ranges if v.same_as(var)), None)
    step = divisors_of(expr, var)
    if extent is None or step == 1 or extent % step == 0:
        return None
    padded = [(v, const(-(-extent // step) * step) if v.same_as(var) else e) for v, e in ranges]
    found = _rep_splits(expr, padded, var)
    if found is None or sum((e - 1) * f for f, e in found) >= extent:
        return None
    return found


def _rep_splits(
    expr: PrimExpr, ranges: Iterable[tuple[Var, PrimExpr]], var: Var
) -> list[tuple[int, int]] | None:
    sums = detect_iter_map([expr], ranges, bijective=False)
    if sums is None:
        return None
    found: list[tuple[int, int]] = []

    def walk_sum(node: Any) -> bool:
        return all(walk_split(split) for split in node.args)

    def walk_split(split: Any) -> bool:
        mark = split.source
        lower, extent, total = as_int(split.lower_factor), as_int(split.extent), as_int(mark.extent)
        if lower is None or extent is None or total is None:
            return False
        if isinstance(mark.source, _sym.IterSumExpr):
            if lower != 1 or extent != total:
                return _no_var(mark.source) or window(mark.source, lower, extent)
            return walk_sum(mark.source)
        if mark.source.same_as(var):
            found.append((lower, extent))
        return True

    def window(node: Any, lower: int, extent: int) -> bool:
        # ``(fused // lower) % extent`` of a fused sum: of each term ``scale * d`` (``d`` a
        # piece of ``var``), the digits of ``d`` that land in ``[lower, lower * extent)``;
        # ``(rep * 128 + i * 32 + j) % 256`` reads ``rep % 2``.
        for split in node.args:
            src = split.source.source
            if isinstance(src, _sym.IterSumExpr):
                if not _no_var(src):
                    return False
                continue
            if not src.same_as(var):
                continue
            scale, factor, size = as_int(split.scale), as_int(split.lower_factor), as_int(split.extent)
            if scale is None or factor is None or size is None:
                return False
            lo, hi = max(lower, scale), min(lower * extent, scale * size)
            if hi <= lo:
                continue  # none of this term's digits is read
            if lo % scale or hi % scale:
                return False
            first, last = lo // scale, hi // scale
            if last % first or size % last:
                return False
            found.append((factor * first, last // first))
        return True

    def _no_var(node: Any) -> bool:
        return all(not split_reads(split) for split in node.args)

    def split_reads(split: Any) -> bool:
        src = split.source.source
        if isinstance(src, _sym.IterSumExpr):
            return not _no_var(src)
        return bool(src.same_as(var))

    if not walk_sum(sums[0]):
        return None
    found.sort()
    for (f1, e1), (f2, _e2) in itertools.pairwise(found):
        if f1 * e1 > f2:
            return None
    return found
