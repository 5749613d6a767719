"""``Layout``: a function from a logical tile index to physical coordinates.

A layout binds one int32 variable per input dimension to ``[0, extent)`` and holds
one tvm expression per output dimension (paper §4.1, Fig. 5). The output shape is
inferred from bounds, so layouts compose, invert and linearize without a separate
shape declaration.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeAlias

import numpy as np

from . import _eval, _tvm
from ._tvm import PrimExpr, Var
from .env import MAX_ENUMERATE
from .errors import LayoutError, LayoutTypeError, LayoutValueError

ShapeLike: TypeAlias = Sequence[int | PrimExpr]
InverseFn: TypeAlias = Callable[..., Any]
IndexLike: TypeAlias = int | PrimExpr

_VAR_NAMES = ("i", "j", "k", "l")


def var_names(ndim: int, prefix: str = "") -> list[str]:
    """Readable names for ``ndim`` input variables (``i, j, k, l``, then ``i4, i5...``)."""
    if ndim <= len(_VAR_NAMES) and not prefix:
        return list(_VAR_NAMES[:ndim])
    return [f"{prefix or 'i'}{d}" for d in range(ndim)]


def normalize_shape(shape: object, what: str = "shape") -> list[PrimExpr]:
    """Check a shape and return it as a list of PrimExprs (constants are IntImm)."""
    if isinstance(shape, int) or _tvm.is_prim_expr(shape):
        shape = [shape]
    if not isinstance(shape, Sequence) or isinstance(shape, str):
        raise LayoutError(
            f"{what} must be a sequence of extents, got {shape!r}",
            hint="pass e.g. [16, 16]; symbolic extents may be tvm PrimExprs",
        )
    if len(shape) == 0:
        raise LayoutError(f"{what} is empty", hint="a layout needs at least one dimension")
    out = []
    for extent in shape:
        value = _tvm.as_int(extent)
        if value is not None:
            if value <= 0:
                raise LayoutError(
                    f"{what} {list(shape)!r} has a non-positive extent {value}",
                    hint="every extent must be >= 1",
                )
            out.append(_tvm.const(value))
        elif _tvm.is_prim_expr(extent):
            out.append(extent)
        else:
            raise LayoutError(
                f"{what} {list(shape)!r} holds {extent!r}, which is not an extent",
                hint="use Python ints or tvm integer PrimExprs",
            )
    return out


def as_expr_list(value: object, what: str) -> list[PrimExpr]:
    """A forward function's result as a list of PrimExprs."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    if not items:
        raise LayoutError(f"{what} returned no expressions", hint="return at least one index")
    try:
        return [_tvm.as_expr(v) for v in items]
    except TypeError as exc:
        raise LayoutError(
            f"{what} returned {value!r}", hint="return a PrimExpr or a list of PrimExprs"
        ) from exc


def shape_ints(shape: Sequence[PrimExpr]) -> tuple[int, ...] | None:
    """The shape as ints, or None when any extent is symbolic."""
    ints = [_tvm.as_int(e) for e in shape]
    if any(v is None for v in ints):
        return None
    return tuple(int(v) for v in ints if v is not None)


def shapes_equal(a: Sequence[PrimExpr], b: Sequence[PrimExpr]) -> bool:
    """Whether two shapes have provably equal extents."""
    if len(a) != len(b):
        return False
    ana = _tvm.analyzer_for([])
    return all(ana.can_prove_equal(x, y) for x, y in zip(a, b, strict=True))


def fmt_shape(shape: Sequence[PrimExpr]) -> str:
    """``[16, 16]`` or ``[n, 16]``."""
    return "[" + ", ".join(str(_tvm.as_int(e) if _tvm.as_int(e) is not None else e) for e in shape) + "]"


def fold_constant(expr: PrimExpr) -> PrimExpr:
    """Fold a variable-free expression to an IntImm (the simplifier leaves XOR of constants)."""
    if _tvm.as_int(expr) is not None or _tvm.free_vars(expr):
        return expr
    try:
        (value,) = _eval.evaluate([expr], {})
    except _eval.UnsupportedExpr:
        return expr
    return _tvm.const(int(value))


def row_major_linearize(indices: Sequence[PrimExpr], shape: Sequence[PrimExpr]) -> PrimExpr:
    """``sum(index_d * stride_d)`` with row-major strides over ``shape``."""
    acc = _tvm.const(0)
    for idx, extent in zip(indices, shape, strict=True):
        acc = acc * extent + idx
    return acc


def row_major_unflatten(flat: PrimExpr, shape: Sequence[int]) -> list[PrimExpr]:
    """The row-major coordinates in ``shape`` of flat position ``flat`` (the inverse of
    :func:`row_major_linearize`)."""
    coords: list[PrimExpr] = []
    for extent in reversed(shape):
        coords.insert(0, _tvm.floormod(flat, extent) if extent != 1 else _tvm.const(0))
        flat = _tvm.floordiv(flat, extent)
    return coords


class Layout:
    """A map from a logical tile index to physical coordinates.

    Args:
        shape: the logical (input) extents; ints, or tvm PrimExprs for symbolic dims.
        forward_fn: called with one int32 ``tvm.tirx.Var`` per input dim; returns the
            physical coordinate(s) as a PrimExpr or a list of PrimExprs.
        inverse_fn: optional inverse for layouts the iterator-map analysis cannot
            invert (XOR swizzles): called with one var per output dim, returns the
            input coordinates. It is checked against ``forward_fn``.

    Example::

        >>> from tile.layout import Layout
        >>> col_major = Layout([4, 8], lambda i, j: j * 4 + i)
        >>> col_major.get_output_shape()
        [32]
        >>> [int(x) for x in col_major.map_forward_index([1, 2])]
        [9]
        >>> [int(x) for x in col_major.inverse().map_forward_index([9])]
        [1, 2]
    """

    _shape: list[PrimExpr]
    _vars: list[Var]
    _forward: list[PrimExpr]
    _inverse_fn: InverseFn | None
    is_fragment = False

    def __init__(
        self, shape: ShapeLike, forward_fn: Callable[..., Any], *, inverse_fn: InverseFn | None = None
    ) -> None:
        dims = normalize_shape(shape)
        variables = [_tvm.make_var(n) for n in var_names(len(dims))]
        forward = as_expr_list(forward_fn(*variables), "forward_fn")
        self._setup(dims, variables, forward, inverse_fn)

    # ----------------------------------------------------------------- construction
    def _setup(
        self,
        shape: list[PrimExpr],
        variables: list[Var],
        forward: list[PrimExpr],
        inverse_fn: InverseFn | None,
    ) -> None:
        self._shape = shape
        self._vars = variables
        self._inverse_fn = inverse_fn
        self._cache: dict[str, Any] = {}
        ana = self._analyzer()
        self._forward = [ana.simplify(e) for e in forward]
        known = set(variables)
        for e in self._forward:
            stray = [v for v in _tvm.free_vars(e) if v not in known and not self._is_symbolic_dim(v)]
            if stray:
                raise LayoutError(
                    f"layout expression {e} uses variables {stray} that are not its inputs",
                    hint="build expressions only from the variables passed to forward_fn",
                )

    def _is_symbolic_dim(self, var: Var) -> bool:
        return any(var in _tvm.free_vars(extent) for extent in self._shape)

    @classmethod
    def from_parts(
        cls,
        shape: Sequence[PrimExpr],
        variables: Sequence[Var],
        forward: Sequence[PrimExpr],
        inverse_fn: InverseFn | None = None,
    ) -> Layout:
        """Build a plain Layout from already-made variables and expressions."""
        obj = Layout.__new__(Layout)
        obj._setup(list(shape), list(variables), list(forward), inverse_fn)
        return obj

    def _all_ranges(self) -> list[tuple[Var, PrimExpr]]:
        """Every bound variable with its extent (a Fragment adds its replication var)."""
        return list(zip(self._vars, self._shape, strict=True))

    def _analyzer(self) -> Any:
        return _tvm.analyzer_for(self._all_ranges())

    # ----------------------------------------------------------------- queries
    @property
    def ndim(self) -> int:
        """Number of input dimensions."""
        return len(self._shape)

    def get_input_shape(self) -> list[PrimExpr]:
        """The logical extents (IntImm for constants)."""
        return list(self._shape)

    def get_forward_vars(self) -> list[Var]:
        """The input variables the forward expressions are written in."""
        return list(self._vars)

    def get_forward_index(self) -> list[PrimExpr]:
        """The simplified physical coordinate expressions."""
        return list(self._forward)

    def const_input_shape(self) -> tuple[int, ...] | None:
        """The input shape as ints, or None when it is symbolic."""
        return shape_ints(self._shape)

    def get_output_shape(self) -> list[PrimExpr]:
        """Extent of every output dimension: its largest value + 1.

        The analyzer bounds each output; for constant domains small enough to
        enumerate, the exact maximum is used, which is tighter for non-affine
        expressions such as XOR swizzles.
        """
        if "out_shape" not in self._cache:
            self._cache["out_shape"] = self._infer_extents(self._forward)
        return list(self._cache["out_shape"])

    def _infer_extents(self, exprs: Sequence[PrimExpr]) -> list[PrimExpr]:
        exact = self._exact_max(exprs)
        if exact is not None:
            return [_tvm.const(m + 1) for m in exact]
        ana = self._analyzer()
        symbolic = self.const_input_shape() is None
        out = []
        for e in exprs:
            if symbolic:
                out.append(ana.simplify(ana.int_set(e).max_value + 1))
            else:
                out.append(_tvm.const(int(ana.const_int_bound(e).max_value) + 1))
        return out

    def _exact_max(self, exprs: Sequence[PrimExpr]) -> list[int] | None:
        values = self._evaluate_all(exprs, quiet=True)
        if values is None:
            return None
        return [int(v.max()) for v in values]

    def _domain(self, quiet: bool) -> list[_eval.IntArray] | None:
        dims = shape_ints([extent for _, extent in self._all_ranges()])
        if dims is None:
            if quiet:
                return None
            raise LayoutError(
                f"layout with symbolic shape {fmt_shape(self._shape)} cannot be enumerated",
                hint="bind the symbolic extents to constants first",
            )
        size = math.prod(dims)
        limit = MAX_ENUMERATE.get()
        if size > limit:
            if quiet:
                return None
            raise LayoutError(
                f"layout has {size} points, more than TILE_LAYOUT_MAX_ENUMERATE={limit}",
                hint="raise TILE_LAYOUT_MAX_ENUMERATE or check a smaller tile",
            )
        return _eval.grid(dims)

    def _evaluate_all(
        self, exprs: Sequence[PrimExpr], quiet: bool = False, extra: dict[Var, Any] | None = None
    ) -> list[_eval.IntArray] | None:
        domain = self._domain(quiet)
        if domain is None:
            return None
        env: dict[Var, Any] = dict(zip([v for v, _ in self._all_ranges()], domain, strict=True))
        env.update(extra or {})
        n = domain[0].shape[0]
        try:
            return _eval.evaluate(exprs, env, (n,))
        except _eval.UnsupportedExpr as exc:
            if quiet:
                return None
            raise LayoutError(f"cannot evaluate layout point by point: {exc}") from exc

    # ----------------------------------------------------------------- mapping
    def _check_arity(self, indices: Sequence[object], ndim: int, what: str) -> None:
        if len(indices) != ndim:
            raise LayoutError(
                f"{what} got {len(indices)} indices for a {ndim}-d layout",
                hint=f"pass exactly {ndim} indices",
            )

    def _substitute(self, exprs: Sequence[PrimExpr], indices: Sequence[IndexLike]) -> list[PrimExpr]:
        self._check_arity(indices, self.ndim, "map_forward_index")
        mapping = {v: _tvm.as_expr(i) for v, i in zip(self._vars, indices, strict=True)}
        ana = _tvm.analyzer_for([])
        return [fold_constant(ana.simplify(_tvm.substitute(e, mapping))) for e in exprs]

    def map_forward_index(self, indices: Sequence[IndexLike]) -> list[PrimExpr]:
        """The physical coordinates of ``indices`` (ints or PrimExprs), simplified."""
        return self._substitute(self._forward, indices)

    def offset(self, indices: Sequence[IndexLike]) -> PrimExpr:
        """Row-major linear offset of ``indices`` within the output shape."""
        coords = self.map_forward_index(indices)
        ana = _tvm.analyzer_for([])
        return fold_constant(ana.simplify(row_major_linearize(coords, self.get_output_shape())))

    def enumerate(self) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Every ``(input_coord, output_coord)`` pair as Python ints, inputs row-major.

        Raises:
            LayoutError: symbolic shape, or more than ``TILE_LAYOUT_MAX_ENUMERATE`` points.
        """
        domain = self._domain(quiet=False)
        values = self._evaluate_all(self._forward)
        assert domain is not None and values is not None
        ins = np.stack(domain, axis=1).tolist()
        outs = np.stack(values, axis=1).tolist()
        for a, b in zip(ins, outs, strict=True):
            yield tuple(a), tuple(b)

    def collision(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
        """``(first, second, place)``: the first input (row-major) that this layout puts where an
        earlier one, ``first``, already is, and that output point; None when every input has a
        point of its own (the layout is injective).

        Raises:
            LayoutError: symbolic shape, or more than ``TILE_LAYOUT_MAX_ENUMERATE`` points.
        """
        domain = self._domain(quiet=False)
        values = self._evaluate_all(self._forward)
        assert domain is not None and values is not None
        places = np.stack(values, axis=1)
        _, firsts, group = np.unique(places, axis=0, return_index=True, return_inverse=True)
        later = np.nonzero(firsts[group.reshape(-1)] != np.arange(len(places)))[0]
        if later.size == 0:
            return None
        second = int(later[0])
        first = int(firsts[group.reshape(-1)[second]])
        coords = np.stack(domain, axis=1)
        return tuple(coords[first].tolist()), tuple(coords[second].tolist()), tuple(places[second].tolist())

    # ----------------------------------------------------------------- equality
    def _renamed(self, other: Layout, exprs: Sequence[PrimExpr]) -> list[PrimExpr]:
        mapping = dict(zip(other._vars, self._vars, strict=True))
        return [_tvm.substitute(e, mapping) for e in exprs]

    def _exprs_equal(
        self,
        mine: Sequence[PrimExpr],
        theirs: Sequence[PrimExpr],
        extra: dict[Var, PrimExpr] | None = None,
    ) -> bool:
        """Whether the expressions agree on the whole domain (``extra`` adds bound vars)."""
        if len(mine) != len(theirs):
            return False
        extra = dict(extra or {})
        ana = _tvm.analyzer_for([*self._all_ranges(), *extra.items()])
        pending = [(a, b) for a, b in zip(mine, theirs, strict=True) if not ana.can_prove_equal(a, b)]
        if not pending:
            return True
        return self._exprs_equal_exhaustive(pending, extra)

    def _exprs_equal_exhaustive(
        self, pairs: Sequence[tuple[PrimExpr, PrimExpr]], extra: dict[Var, PrimExpr]
    ) -> bool:
        ranges = [*self._all_ranges(), *extra.items()]
        full = shape_ints([e for _, e in ranges])
        if full is None or math.prod(full) > MAX_ENUMERATE.get():
            return False
        points = _eval.grid(full)
        env = dict(zip([v for v, _ in ranges], points, strict=True))
        try:
            values = _eval.evaluate([e for p in pairs for e in p], env, (points[0].shape[0],))
        except _eval.UnsupportedExpr:
            return False
        return all(np.array_equal(values[2 * k], values[2 * k + 1]) for k in range(len(pairs)))

    def is_equal(self, other: object) -> bool:
        """Semantic equality: same shapes and the same map, whatever the var names."""
        if not isinstance(other, Layout) or other.is_fragment != self.is_fragment:
            return False
        if not shapes_equal(self._shape, other._shape):
            return False
        return self._exprs_equal(self._forward, self._renamed(other, other._forward))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self.is_equal(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.ndim, len(self._forward), self.const_input_shape()))

    # ----------------------------------------------------------------- algebra
    def compose(self, inner: Layout) -> Layout:
        """The layout ``x -> self(inner(x))``.

        Raises:
            LayoutError: ``inner``'s output shape is not this layout's input shape.
        """
        mapping = self._composed_inputs(inner)
        forward = [_tvm.substitute(e, mapping) for e in self._forward]
        inverse_fn = None
        if self._inverse_fn is not None or inner._inverse_fn is not None:
            outer_layout, inner_layout = self, inner

            def inverse_fn(*out: PrimExpr) -> list[PrimExpr]:
                mid = outer_layout.inverse().map_forward_index(list(out))
                return inner_layout.inverse().map_forward_index(mid)

        return Layout.from_parts(inner._shape, inner._vars, forward, inverse_fn)

    def expand(self, leading: int | Sequence[int]) -> Layout:
        """This layout under new leading dims: ``(*lead, *x) -> (*lead, *self(x))``.

        A shared tile of shape ``(stages, rows, cols)`` laid out as its ``(rows, cols)``
        swizzle per stage is ``swizzle.expand([stages])``. No leading dims give this layout.

        Example::

            >>> from tile.layout import Layout
            >>> flat = Layout([16, 128], lambda j, k: j * 128 + k).expand([4])
            >>> [int(e) for e in flat.get_output_shape()], [int(e) for e in flat.map_forward_index([1, 2, 3])]
            ([4, 2048], [1, 259])

        Raises:
            LayoutValueError: a count below 1 (also a ``ValueError``).
            LayoutTypeError: ``leading`` is not an int or a sequence of ints.
        """
        counts = _counts(leading, "expand")
        if not counts:
            return self
        lead = [_tvm.make_var(n) for n in var_names(len(counts), "e")]
        inverse_fn = None
        if self._inverse_fn is not None:
            base, nlead = self, len(counts)

            def inverse_fn(*out: PrimExpr) -> list[PrimExpr]:
                return [*out[:nlead], *base.inverse().map_forward_index(list(out[nlead:]))]

        shape = [_tvm.const(c) for c in counts] + list(self._shape)
        return Layout.from_parts(shape, [*lead, *self._vars], [*lead, *self._forward], inverse_fn)

    def repeat(self, dim: int, factor: int) -> Layout:
        """``factor`` copies of this layout side by side along input ``dim``.

        Input ``dim`` grows ``factor`` times; the copy number becomes a new leading output:
        ``x -> (x[dim] // n, *self(x with x[dim] % n))`` for ``n`` the extent of ``dim``.
        A factor of 1 gives this layout. (``Fragment.repeat`` tiles a fragment instead.)

        Example::

            >>> from tile.layout import Layout
            >>> two = Layout([8, 64], lambda i, j: i * 64 + j).repeat(dim=0, factor=2)
            >>> [int(e) for e in two.get_output_shape()], [int(e) for e in two.map_forward_index([9, 3])]
            ([2, 512], [1, 67])

        Raises:
            LayoutValueError: ``dim`` is not one of this layout's dims, or ``factor`` < 1.
        """
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise LayoutTypeError(f"repeat: dim must be an int, got {dim!r}", hint="pass dim=0 for the rows")
        if not -self.ndim <= dim < self.ndim:
            raise LayoutValueError(
                f"repeat: dim {dim} is not a dim of this {self.ndim}-d layout",
                hint=f"pass a dim in [{-self.ndim}, {self.ndim})",
            )
        (count,) = _counts([factor], "repeat")
        if count == 1:
            return self
        dim %= self.ndim
        extent = self._shape[dim]
        new_vars = [_tvm.make_var(n) for n in var_names(self.ndim, "r")]
        inner = dict(zip(self._vars, new_vars, strict=True))
        inner[self._vars[dim]] = _tvm.floormod(new_vars[dim], extent)
        forward = [_tvm.floordiv(new_vars[dim], extent), *(_tvm.substitute(e, inner) for e in self._forward)]
        shape = list(self._shape)
        shape[dim] = extent * count
        return Layout.from_parts(shape, new_vars, forward)

    def get_linearized_forward_index(self) -> PrimExpr:
        """The output coordinates as one row-major offset into the output shape."""
        return self._analyzer().simplify(row_major_linearize(self._forward, self.get_output_shape()))

    def _composed_inputs(self, inner: Layout) -> dict[Var, PrimExpr]:
        """This layout's (or fragment's) input variables as ``inner``'s outputs, for ``compose``.

        Raises:
            LayoutError: ``inner``'s output shape is not this layout's input shape.
        """
        what = "fragment" if self.is_fragment else "layout"
        inner_out = inner.get_output_shape()
        if not shapes_equal(inner_out, self._shape):
            raise LayoutError(
                f"cannot compose: inner layout produces {fmt_shape(inner_out)} "
                f"but this {what} takes {fmt_shape(self._shape)}",
                hint=f"compose(inner) needs inner's output shape to equal this {what}'s input shape",
            )
        return dict(zip(self._vars, inner.get_forward_index(), strict=True))

    def _const_size_check(self, out_shape: Sequence[PrimExpr]) -> bool:
        ana = _tvm.analyzer_for([])
        return bool(ana.can_prove_equal(_prod(self._shape), _prod(out_shape)))

    def is_bijective(self) -> bool:
        """Whether every output point of the output box is hit exactly once.

        Raises:
            LayoutError: a symbolic non-affine layout, which cannot be decided.
        """
        if "bijective" in self._cache:
            return bool(self._cache["bijective"])
        out_shape = self.get_output_shape()
        result: bool | None
        if not self._const_size_check(out_shape):
            result = False
        elif _tvm.detect_iter_map(self._forward, self._all_ranges(), bijective=True) is not None:
            result = True
        else:
            result = self._bijective_by_enumeration(out_shape)
        if result is None:
            raise LayoutError(
                "cannot decide whether this symbolic, non-affine layout is bijective",
                hint="use constant extents, or an affine forward function",
            )
        self._cache["bijective"] = result
        return result

    def _bijective_by_enumeration(self, out_shape: Sequence[PrimExpr]) -> bool | None:
        outs = shape_ints(out_shape)
        values = self._evaluate_all(self._forward, quiet=True)
        if values is None or outs is None:
            return None
        if any(int(v.min()) < 0 for v in values):
            return False
        flat = np.ravel_multi_index(tuple(values), outs)
        return int(np.unique(flat).size) == math.prod(outs) == flat.size

    def inverse(self) -> Layout:
        """The inverse layout (output coordinates -> input coordinates).

        Affine layouts are inverted by tvm's iterator-map analysis; others use the
        ``inverse_fn`` given at construction, after checking it, or, for a constant shape,
        the input's row-major position when it is found to be an affine function of the
        outputs (:meth:`_invert_through_flat_index`).

        Raises:
            LayoutError: the layout is not bijective, or no inverse could be found.
        """
        if "inverse" in self._cache:
            return self._cache["inverse"]  # type: ignore[no-any-return]
        if not self.is_bijective():
            raise LayoutError(
                f"layout {self} is not bijective onto its output shape {fmt_shape(self.get_output_shape())}",
                hint="use inverse_with_guard() for padded (injective) layouts",
            )
        result = self._invert_affine() or self._invert_with_fn() or self._invert_through_flat_index()
        if result is None:
            raise LayoutError(
                f"cannot invert non-affine layout {self}",
                hint="pass inverse_fn= when building it (e.g. an XOR swizzle is its own inverse)",
            )
        self._cache["inverse"] = result
        return result

    @staticmethod
    def _out_vars(n: int) -> list[Var]:
        return [_tvm.make_var(f"o{d}") for d in range(n)]

    def _forward_as_fn(self) -> InverseFn:
        def fwd(*inputs: PrimExpr) -> list[PrimExpr]:
            return self.map_forward_index(list(inputs))

        return fwd

    def _invert_affine(self) -> Layout | None:
        try:
            imap = _tvm.IndexMap(self._vars, self._forward, None).inverse(self._shape)
        except _tvm.TVMError:
            return None
        out_shape = self.get_output_shape()
        new_vars = self._out_vars(len(out_shape))
        mapping = dict(zip(imap.initial_indices, new_vars, strict=True))
        exprs = [_tvm.substitute(e, mapping) for e in imap.final_indices]
        return Layout.from_parts(out_shape, new_vars, exprs, self._forward_as_fn())

    def _invert_with_fn(self) -> Layout | None:
        if self._inverse_fn is None:
            return None
        out_shape = self.get_output_shape()
        new_vars = self._out_vars(len(out_shape))
        exprs = as_expr_list(self._inverse_fn(*new_vars), "inverse_fn")
        if len(exprs) != self.ndim:
            raise LayoutError(
                f"inverse_fn returned {len(exprs)} coordinates for a {self.ndim}-d layout",
                hint="inverse_fn takes the output coordinates and returns the input ones",
            )
        candidate = Layout.from_parts(out_shape, new_vars, exprs, self._forward_as_fn())
        self._verify_left_inverse(candidate)
        return candidate

    def _invert_through_flat_index(self) -> Layout | None:
        """The inverse of a constant-shape layout whose input position (row-major, over the
        input dims in some order) is an affine function of its outputs, found point by point.

        The layouts a flat index split over threads and registers gives, once simplified:
        ``(i * 16 + j * 4 + k) % 128`` and ``i // 8`` over ``32 x 4 x 4`` is the split
        ``p % 128, p // 128`` of the position ``p``, which tvm's iterator-map analysis no
        longer sees (the second output names ``i`` alone). The position is then
        ``t + 128 * l``, and the inputs its row-major coordinates. A replicated fragment's
        owner layout walks its dims in another order (``(i * 16 + rep * 4 + j) % 128`` over
        ``(i, j, rep)``), so every order of up to four dims is tried, the given one first.
        """
        extents = shape_ints(self._shape)
        domain = self._domain(quiet=True)
        outputs = self._evaluate_all(self._forward, quiet=True)
        if extents is None or domain is None or outputs is None or not extents:
            return None
        ones = np.ones_like(domain[0], dtype=np.int64)
        system = np.stack([*(o.astype(np.int64) for o in outputs), ones], axis=1)
        as_float = system.astype(np.float64)
        dims = range(len(extents))
        orders = itertools.permutations(dims) if len(extents) <= 4 else iter([tuple(dims)])
        for order in orders:
            walked = [extents[d] for d in order]
            position = np.ravel_multi_index(tuple(domain[d] for d in order), walked).astype(np.int64)
            solved, *_ = np.linalg.lstsq(as_float, position.astype(np.float64), rcond=None)
            coeffs = np.rint(solved).astype(np.int64)
            if not np.array_equal(system @ coeffs, position):
                continue
            out_shape = self.get_output_shape()
            new_vars = self._out_vars(len(out_shape))
            flat: PrimExpr = _tvm.const(int(coeffs[-1]))
            for var, c in zip(new_vars, coeffs[:-1], strict=True):
                if c:
                    flat = flat + var * int(c)
            coords = dict(zip(order, row_major_unflatten(flat, walked), strict=True))
            inputs = [coords[d] for d in dims]
            candidate = Layout.from_parts(out_shape, new_vars, inputs, self._forward_as_fn())
            self._verify_left_inverse(candidate)
            return candidate
        return None

    def _verify_left_inverse(self, candidate: Layout) -> None:
        """Check ``candidate(self(x)) == x`` for every input (when decidable)."""
        mapping = dict(zip(candidate._vars, self._forward, strict=True))
        round_trip = [_tvm.substitute(e, mapping) for e in candidate._forward]
        if not self._exprs_equal(round_trip, self._vars):
            if self._domain(quiet=True) is None:
                return  # symbolic and unprovable: accepted as given
            raise LayoutError(
                f"inverse_fn is not an inverse of {self}",
                hint="inverse_fn(forward(x)) must return x for every x in the shape",
            )

    def inverse_with_guard(self) -> tuple[Layout, PrimExpr]:
        """Inverse of an injective (e.g. padded) layout, plus where it is valid.

        Returns ``(inv, guard)``: ``inv`` is defined over the whole output box and
        ``guard`` (a PrimExpr in ``inv``'s variables) is true exactly on the
        output points that some input maps to. A bijective layout gets ``True``.

        Raises:
            LayoutError: the layout is not injective, or no inverse could be found.
        """
        if self.is_bijective():
            return self.inverse(), _tvm.as_expr(True)
        out_shape = self.get_output_shape()
        candidate = self._guarded_candidate(out_shape)
        if candidate is None:
            raise LayoutError(
                f"cannot invert layout {self}",
                hint="pass inverse_fn= (output coords -> input coords) when building it",
            )
        inv, guard = candidate
        self._verify_guarded(inv, guard)
        return inv, guard

    def _guarded_candidate(self, out_shape: list[PrimExpr]) -> tuple[Layout, PrimExpr] | None:
        new_vars = self._out_vars(len(out_shape))
        exprs: list[PrimExpr] | None = None
        if self._inverse_fn is not None:
            exprs = as_expr_list(self._inverse_fn(*new_vars), "inverse_fn")
        else:
            exprs = _strided_inverse(self._vars, self._forward, new_vars) or self._padded_inverse(new_vars)
        if exprs is None:
            return None
        inv = Layout.from_parts(out_shape, new_vars, exprs, self._forward_as_fn())
        conds = []
        for e, extent in zip(inv._forward, self._shape, strict=True):
            conds += [e >= 0, e < extent]
        for o, back in zip(new_vars, self.map_forward_index(inv._forward), strict=True):
            conds.append(back == o)
        guard = inv._analyzer().simplify(_tvm.logical_and(*conds))
        return inv, guard

    def _padded_inverse(self, new_vars: Sequence[Var]) -> list[PrimExpr] | None:
        """The affine inverse over the input box grown until every ``//`` and ``%`` divides it.

        ``(i % 8 * 16 + j % 16, i // 8 * 21 + j // 16)`` over ``16 x 333`` is a bijection of
        ``16 x 336``; its inverse there is also this layout's inverse on the image (the
        caller's guard keeps the real box).
        """
        extents = shape_ints(self._shape)
        if extents is None:
            return None
        padded = []
        for var, extent in zip(self._vars, extents, strict=True):
            step = math.lcm(*(_tvm.divisors_of(e, var) for e in self._forward))
            padded.append(-(-extent // step) * step)
        if padded == list(extents):
            return None
        try:
            imap = _tvm.IndexMap(self._vars, self._forward, None).inverse([_tvm.const(p) for p in padded])
        except _tvm.TVMError:
            return None
        if len(imap.initial_indices) != len(new_vars):
            return None
        mapping = dict(zip(imap.initial_indices, new_vars, strict=True))
        return [_tvm.substitute(e, mapping) for e in imap.final_indices]

    def _verify_guarded(self, inv: Layout, guard: PrimExpr) -> None:
        outs = shape_ints(inv._shape)
        image = self._evaluate_all(self._forward, quiet=True)
        got = inv._evaluate_all([guard, *inv._forward], quiet=True)
        if outs is None or image is None or got is None:
            return
        if any(int(v.min()) < 0 for v in image):
            raise LayoutError(f"layout {self} produces negative coordinates", hint="check forward_fn")
        flat = np.ravel_multi_index(tuple(image), outs)
        if np.unique(flat).size != flat.size:
            raise LayoutError(
                f"layout {self} maps several inputs to one output, so it has no inverse",
                hint="only injective layouts (e.g. padding) have a guarded inverse",
            )
        hit = np.zeros(math.prod(outs), dtype=bool)
        hit[flat] = True
        if not np.array_equal(got[0].astype(bool), hit):
            raise LayoutError(f"the inverse of {self} has a wrong validity guard", hint="check inverse_fn")
        back = np.ravel_multi_index(tuple(v[hit] for v in got[1:]), shape_ints(self._shape) or ())
        expected = np.arange(flat.size)[np.argsort(flat)]
        if not np.array_equal(back, expected):
            raise LayoutError(f"inverse_fn is not an inverse of {self}", hint="check inverse_fn")

    # ----------------------------------------------------------------- printing
    def _signature(self) -> str:
        return ", ".join(str(v) for v in self._vars)

    def __repr__(self) -> str:
        body = ", ".join(str(e) for e in self._forward)
        return (
            f"Layout({fmt_shape(self._shape)} -> {fmt_shape(self.get_output_shape())}: "
            f"({self._signature()}) -> ({body}))"
        )


def _counts(value: object, what: str) -> list[int]:
    """``value`` (an int or a sequence of ints) as a list of counts >= 1."""
    items = [value] if isinstance(value, int) else value
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise LayoutTypeError(
            f"{what}: expected an int or a list of ints, got {value!r}", hint=f"for example {what}([4])"
        )
    out: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int):
            raise LayoutTypeError(f"{what}: {item!r} is not an int count", hint="pass Python ints")
        if item < 1:
            raise LayoutValueError(f"{what}: count {item} is below 1", hint="every count must be 1 or more")
        out.append(item)
    return out


def _prod(shape: Sequence[PrimExpr]) -> PrimExpr:
    acc = _tvm.const(1)
    for e in shape:
        acc = acc * e
    return acc


def _strided_inverse(
    in_vars: Sequence[Var], forward: Sequence[PrimExpr], out_vars: Sequence[Var]
) -> list[PrimExpr] | None:
    """Invert a layout whose every output is ``base + sum(c_v * v)`` over disjoint vars.

    Each output is split back into its variables by mixed radix, largest coefficient
    first; the result is only meaningful where the caller's guard holds.
    """
    owner: dict[Any, PrimExpr] = {}
    for out_var, expr in zip(out_vars, forward, strict=True):
        coeffs = _tvm.linear_coefficients(expr, in_vars)
        if coeffs is None:
            return None
        *scales, base = coeffs
        terms = sorted([(c, v) for c, v in zip(scales, in_vars, strict=True) if c != 0], key=lambda t: -t[0])
        if any(c < 0 for c, _ in terms):
            return None
        rest = out_var - base
        for pos, (scale, var) in enumerate(terms):
            if var in owner:
                return None
            last = pos == len(terms) - 1
            owner[var] = _tvm.floordiv(rest, scale) if not last or scale != 1 else rest
            rest = _tvm.floormod(rest, scale)
    if len(owner) != len(in_vars):
        return None
    return [owner[v] for v in in_vars]


def row_major_reshape(new_shape: Sequence[int], old_shape: Sequence[int]) -> Layout:
    """The layout ``x -> y`` taking an index of ``new_shape`` to the index of ``old_shape`` at
    the same row-major position (``numpy.reshape``'s correspondence).

    Example::

        >>> from tile.layout.layout import row_major_reshape
        >>> [int(e) for e in row_major_reshape([32], [4, 8]).map_forward_index([13])]
        [1, 5]
    """
    dims = [int(d) for d in new_shape]
    return Layout(
        dims,
        lambda *v: row_major_unflatten(
            row_major_linearize(list(v), [_tvm.const(d) for d in dims]), old_shape
        ),
    )
