"""``Fragment``: how a register tile is spread over the threads of a block.

A fragment maps every logical element to ``(thread, local index)`` (paper §4.1,
Fig. 6). With ``replicate = R`` each element is held by R threads; the thread
expression then also reads a replication variable ``rep`` in ``[0, R)``. The
inherited ``Layout`` view is the local-index map; ``thread`` is kept beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import _eval, _tvm
from ._tvm import PrimExpr, Var
from .errors import LayoutError
from .layout import (
    IndexLike,
    Layout,
    ShapeLike,
    as_expr_list,
    fmt_shape,
    fold_constant,
    normalize_shape,
    row_major_linearize,
    row_major_reshape,
    shape_ints,
    shapes_equal,
    var_names,
)

REP_NAME = "rep"


def _check_count(value: object, what: str) -> int:
    count = _tvm.as_int(value)
    if count is None or isinstance(value, bool) or count < 1:
        raise LayoutError(f"{what} must be a positive int, got {value!r}", hint=f"pass {what} >= 1")
    return count


class Fragment(Layout):
    """A register tile distributed over threads: element -> (thread, local index).

    Args:
        shape: logical tile extents.
        forward_fn: ``f(*vars[, rep]) -> (thread, index_or_list)``; receives the
            replication var as last argument when ``replicate > 1``.
        forward_thread_fn: split form, ``f(*vars[, rep]) -> thread``.
        replicate: how many threads hold each element.
        forward_index_fn: split form, ``f(*vars) -> index_or_list``; without it every element
            gets its own register, numbered row-major (as many locals as elements).

    Example (the m16n8 mma accumulator, PTX ISA "Matrix Fragments for mma.m16n8k16")::

        >>> from tile.layout import Fragment
        >>> c = Fragment([16, 8], forward_fn=lambda i, j: (i % 8 * 4 + j // 2, i // 8 * 2 + j % 2))
        >>> int(c.get_thread_size()), c.locals_per_thread()
        (32, 4)
        >>> c.owners((9, 3))
        [5]
        >>> int(c.map_forward_index([9, 3])[0])
        3
    """

    is_fragment = True
    _thread: PrimExpr
    _rep_var: Var
    _replicate: int
    _thread_range: tuple[PrimExpr, PrimExpr] | None

    def __init__(
        self,
        shape: ShapeLike,
        forward_fn: Callable[..., Any] | None = None,
        forward_thread_fn: Callable[..., Any] | None = None,
        replicate: int = 1,
        forward_index_fn: Callable[..., Any] | None = None,
    ) -> None:
        dims = normalize_shape(shape)
        rep_count = _check_count(replicate, "replicate")
        variables = [_tvm.make_var(n) for n in var_names(len(dims))]
        rep_var = _tvm.make_var(REP_NAME)
        rep_args = [rep_var] if rep_count > 1 else []
        if forward_fn is not None:
            if forward_thread_fn is not None or forward_index_fn is not None:
                raise LayoutError(
                    "Fragment got forward_fn together with forward_thread_fn/forward_index_fn",
                    hint="pass either forward_fn, or forward_thread_fn and forward_index_fn",
                )
            result = forward_fn(*variables, *rep_args)
            if not isinstance(result, list | tuple) or len(result) != 2:
                raise LayoutError(
                    f"forward_fn must return (thread, index), got {result!r}",
                    hint="return a pair: the thread expression and the local index (or list)",
                )
            thread, index = result
        elif forward_thread_fn is not None:
            thread = forward_thread_fn(*variables, *rep_args)
            if forward_index_fn is not None:
                index = forward_index_fn(*variables)
            else:  # every element its own register: row-major (always valid, seldom compact)
                index = row_major_linearize(variables, dims)
        else:
            raise LayoutError(
                "Fragment needs forward_fn, or forward_thread_fn (and optionally forward_index_fn)",
                hint="e.g. Fragment([16, 8], forward_fn=lambda i, j: (thread, index))",
            )
        thread_exprs = as_expr_list(thread, "the thread function")
        if len(thread_exprs) != 1:
            raise LayoutError("the thread function must return one expression", hint="return a PrimExpr")
        self._setup_fragment(
            dims, variables, as_expr_list(index, "the index function"), thread_exprs[0], rep_var, rep_count
        )

    # ----------------------------------------------------------------- construction
    def _setup_fragment(
        self,
        shape: list[PrimExpr],
        variables: list[Var],
        index: list[PrimExpr],
        thread: PrimExpr,
        rep_var: Var,
        replicate: int,
        thread_range: tuple[PrimExpr, PrimExpr] | None = None,
    ) -> None:
        self._rep_var = rep_var
        self._replicate = replicate
        self._thread_range = thread_range
        self._setup(shape, variables, index, None)
        ana = self._analyzer()
        self._thread = ana.simplify(thread)
        if replicate == 1:
            self._thread = ana.simplify(_tvm.substitute(self._thread, {rep_var: _tvm.const(0)}))
        known = {*variables, rep_var}
        stray = [v for v in _tvm.free_vars(self._thread) if v not in known and not self._is_symbolic_dim(v)]
        if stray:
            raise LayoutError(
                f"thread expression {self._thread} uses variables {stray} that are not its inputs",
                hint="build the thread from the variables passed to the thread function",
            )

    @classmethod
    def _make(
        cls,
        shape: Sequence[PrimExpr],
        variables: Sequence[Var],
        index: Sequence[PrimExpr],
        thread: PrimExpr,
        rep_var: Var,
        replicate: int,
        thread_range: tuple[PrimExpr, PrimExpr] | None = None,
    ) -> Fragment:
        obj = Fragment.__new__(Fragment)
        obj._setup_fragment(
            list(shape), list(variables), list(index), thread, rep_var, replicate, thread_range
        )
        return obj

    def _all_ranges(self) -> list[tuple[Var, PrimExpr]]:
        ranges = list(zip(self._vars, self._shape, strict=True))
        return [*ranges, (self._rep_var, _tvm.const(self._replicate))]

    # ----------------------------------------------------------------- queries
    @property
    def thread(self) -> PrimExpr:
        """The thread expression over the input vars and ``rep_var``."""
        return self._thread

    @property
    def rep_var(self) -> Var:
        """The replication variable, in ``[0, replicate_size)``."""
        return self._rep_var

    @property
    def replicate_size(self) -> int:
        """How many threads hold each element."""
        return self._replicate

    @property
    def thread_range(self) -> tuple[PrimExpr, PrimExpr] | None:
        """``(begin, extent)`` set by :meth:`bind_thread_range`, else None."""
        return self._thread_range

    def get_thread_size(self) -> PrimExpr:
        """Thread extent: the largest thread id + 1 (an IntImm for constant shapes)."""
        if "thread_size" not in self._cache:
            self._cache["thread_size"] = self._infer_extents([self._thread])[0]
        return self._cache["thread_size"]

    def _thread_size_int(self, what: str) -> int:
        size = _tvm.as_int(self.get_thread_size())
        if size is None:
            raise LayoutError(f"{what} needs a constant thread extent", hint="use constant tile shapes")
        return size

    def locals_per_thread(self) -> int:
        """Registers each thread holds: the product of the local-index extents."""
        dims = shape_ints(self.get_output_shape())
        if dims is None:
            raise LayoutError("locals_per_thread needs constant shapes", hint="use constant tile shapes")
        return math.prod(dims)

    def map_forward_thread(self, indices: Sequence[IndexLike], rep: IndexLike = 0) -> PrimExpr:
        """The thread holding ``indices`` for replica ``rep``, simplified."""
        self._check_arity(indices, self.ndim, "map_forward_thread")
        mapping = {v: _tvm.as_expr(i) for v, i in zip(self._vars, indices, strict=True)}
        mapping[self._rep_var] = _tvm.as_expr(rep)
        return fold_constant(_tvm.analyzer_for([]).simplify(_tvm.substitute(self._thread, mapping)))

    def as_layout(self) -> Layout:
        """The layout ``coord -> (thread, *local index)`` of a fragment without replication."""
        if self._replicate != 1:
            raise LayoutError(
                "as_layout() needs a fragment without replication",
                hint="call remove_rep_var() first",
            )
        return Layout.from_parts(self._shape, self._vars, [self._thread, *self._forward])

    def owner_layout(self) -> Layout:
        """The layout ``(*coord, rep) -> (thread, *local index)``: every owner of every element.

        Unlike ``as_layout`` it keeps the replication var (as a last input dim of extent
        ``replicate_size``), so its inverse tells every thread, replica or not, which
        element it holds at each local index and in which replica.
        """
        return Layout.from_parts(
            [*self._shape, _tvm.const(self._replicate)],
            [*self._vars, self._rep_var],
            [self._thread, *self._forward],
        )

    def is_bijective(self) -> bool:
        """Whether every (thread, local) slot of the box holds exactly one element."""
        return self._replicate == 1 and self.as_layout().is_bijective()

    def inverse(self) -> Layout:
        """``(thread, *local index) -> coord`` for a bijective, unreplicated fragment."""
        return self.as_layout().inverse()

    # ----------------------------------------------------------------- algebra
    def _index_1d(self) -> tuple[PrimExpr, PrimExpr]:
        """The local index linearized row-major, and the number of locals."""
        out_shape = self.get_output_shape()
        flat = row_major_linearize(self._forward, out_shape)
        count = _tvm.const(1)
        for e in out_shape:
            count = count * e
        return flat, count

    def repeat(  # type: ignore[override]  # TileLang's two repeats: a layout by dim, a fragment by tiles
        self,
        repeats: int | Sequence[int],
        repeat_on_thread: bool = False,
        lower_dim_first: bool = True,
    ) -> Fragment:
        """Tile this fragment ``repeats[d]`` times along every dim d.

        Copy number ``r`` goes on new threads (``thread + r * thread_size``) when
        ``repeat_on_thread``, else on new registers (``index + r * locals``, with the
        index linearized to one dim). ``r`` counts the copies with dim 0 fastest when
        ``lower_dim_first``, else with the last dim fastest. An int repeats dim 0.

        Example::

            >>> from tile.layout.hardware import ldmatrix_fragment
            >>> warp = ldmatrix_fragment(1).repeat([2, 1])         # 8x8 -> 16x8, 2 regs more
            >>> [int(e) for e in warp.get_output_shape()], int(warp.get_thread_size())
            ([4], 32)
        """
        counts = self._normalize_repeats(repeats)
        new_vars = [_tvm.make_var(n) for n in var_names(self.ndim)]
        new_shape = [extent * c for extent, c in zip(self._shape, counts, strict=True)]
        inner = {
            v: _tvm.floormod(nv, extent)
            for v, nv, extent in zip(self._vars, new_vars, self._shape, strict=True)
        }
        order = range(self.ndim) if lower_dim_first else reversed(range(self.ndim))
        copy, stride = _tvm.const(0), 1
        for d in order:
            copy = copy + _tvm.floordiv(new_vars[d], self._shape[d]) * stride
            stride *= counts[d]
        if repeat_on_thread:
            thread = _tvm.substitute(self._thread, inner) + copy * self.get_thread_size()
            index = [_tvm.substitute(e, inner) for e in self._forward]
        else:
            flat, count = self._index_1d()
            thread = _tvm.substitute(self._thread, inner)
            index = [_tvm.substitute(flat, inner) + copy * count]
        return Fragment._make(new_shape, new_vars, index, thread, self._rep_var, self._replicate)

    def _normalize_repeats(self, repeats: int | Sequence[int]) -> list[int]:
        if isinstance(repeats, int):
            repeats = [repeats] + [1] * (self.ndim - 1)
        if len(repeats) != self.ndim:
            raise LayoutError(
                f"repeat got {len(repeats)} counts for a {self.ndim}-d fragment",
                hint=f"pass one repeat count per dim ({self.ndim})",
            )
        return [_check_count(c, "every repeat count") for c in repeats]

    def replicate(self, repeats: int) -> Fragment:
        """``repeats`` times more threads; each element is held by ``repeats`` times more.

        Replica ``rep`` of the result is replica ``rep % R`` of this fragment moved to
        threads ``+ (rep // R) * thread_size`` (R = ``replicate_size``).
        """
        count = _check_count(repeats, "replicate")
        new_rep = _tvm.make_var(REP_NAME)
        old = self._replicate
        moved = _tvm.substitute(self._thread, {self._rep_var: _tvm.floormod(new_rep, old)})
        thread = moved + _tvm.floordiv(new_rep, old) * self.get_thread_size()
        return Fragment._make(self._shape, self._vars, self._forward, thread, new_rep, old * count)

    def remove_rep_var(self) -> Fragment:
        """One owner per element: replica 0 of every element."""
        thread = _tvm.substitute(self._thread, {self._rep_var: _tvm.const(0)})
        return Fragment._make(self._shape, self._vars, self._forward, thread, _tvm.make_var(REP_NAME), 1)

    def condense_rep_var(self) -> Fragment:
        """The same ownership with the replication var reduced to its true extent.

        A thread expression that reads only part of ``rep`` (say ``rep // 2``) names
        each owner several times; the result keeps one ``rep`` value per owner. A
        thread that ignores ``rep`` gives ``replicate_size == 1``.

        Raises:
            LayoutError: the thread expression is not affine in ``rep`` and some replicas of an
                element share a thread (replicas all on distinct threads need no condensing).
        """
        if self._replicate == 1 or self._rep_var not in _tvm.free_vars(self._thread):
            return self.remove_rep_var()
        splits = _tvm.rep_splits(self._thread, self._all_ranges(), self._rep_var)
        if splits is None and self._replicas_distinct():
            return self  # rep * 16 + i with i < 5: not an iterator map, but nothing to condense
        if splits is None:
            raise LayoutError(
                f"cannot condense the replication var of {self}: thread is not affine in it",
                hint="write the thread as an affine function of rep",
            )
        true_extent = math.prod(extent for _, extent in splits)
        if true_extent == self._replicate:
            return self
        new_rep = _tvm.make_var(REP_NAME)
        value, inner = _tvm.const(0), 1
        for lower_factor, extent in sorted(splits):
            value = value + _tvm.floormod(_tvm.floordiv(new_rep, inner), extent) * lower_factor
            inner *= extent
        thread = _tvm.substitute(self._thread, {self._rep_var: value})
        return Fragment._make(self._shape, self._vars, self._forward, thread, new_rep, true_extent)

    def _replicas_distinct(self) -> bool:
        """Whether every element's replicas sit on distinct threads (checked point by point)."""
        values = self._evaluate_all([self._thread], quiet=True)
        dims = self.const_input_shape()
        if values is None or dims is None:
            return False
        per = np.sort(values[0].reshape(math.prod(dims), self._replicate), axis=1)
        return bool(np.all(np.diff(per, axis=1) != 0))

    def compact_index(self) -> Fragment:
        """The same ownership with the local index renumbered without gaps.

        A local index that is a sum of pieces of the coordinates whose value set has
        holes (the rows of an mma accumulator, its columns dropped, sit at locals
        0, 2, 16, 18 of 32) becomes the mixed-radix count of those pieces (0..3), in the
        same order. The result is this fragment itself when the index has no holes or
        is not such a sum (symbolic shapes, overlapping pieces).

        Example::

            >>> from tile.layout import Fragment
            >>> rows = Fragment([16], forward_fn=lambda i: (i % 8, i // 8 * 2))
            >>> rows.locals_per_thread(), rows.compact_index().locals_per_thread()
            (3, 2)
        """
        flat, count = self._index_1d()
        total = _tvm.as_int(count)
        if total is None or self.const_input_shape() is None:
            return self
        terms = _tvm.split_terms(flat, list(zip(self._vars, self._shape, strict=True)))
        if terms is None:
            return self
        terms = sorted((t for t in terms if t[1] > 1), key=lambda t: t[2])
        reach = 1  # the pieces decode uniquely: each scale clears the span of the smaller ones
        for _piece, extent, scale in terms:
            if scale < reach:
                return self
            reach = scale * extent
        dense = math.prod(extent for _piece, extent, _scale in terms)
        if dense >= total:
            return self
        index, stride = _tvm.const(0), 1
        for piece, extent, _scale in terms:
            index = index + piece * stride
            stride *= extent
        out = Fragment._make(
            self._shape, self._vars, [index], self._thread, self._rep_var, self._replicate,
            self._thread_range,
        )  # fmt: skip
        values = self._evaluate_all([flat, index], quiet=True)
        if values is None:
            return self
        old, new = values
        pairs = np.unique(np.stack([old, new], axis=1), axis=0)
        if len(np.unique(pairs[:, 0])) != len(pairs) or len(np.unique(pairs[:, 1])) != len(pairs):
            return self  # not a renumbering of the same slots
        return out

    def bind_thread_range(self, begin: IndexLike, extent: IndexLike) -> Fragment:
        """This fragment on threads ``[begin, begin + extent)`` (warp specialization).

        Raises:
            LayoutError: the fragment needs more than ``extent`` threads.
        """
        size = self.get_thread_size()
        begin_e, extent_e = _tvm.as_expr(begin), _tvm.as_expr(extent)
        ana = _tvm.analyzer_for([])
        if not ana.can_prove(size <= extent_e):
            raise LayoutError(
                f"fragment needs {size} threads, more than the range extent {extent}",
                hint="bind it to a range at least as wide as get_thread_size()",
            )
        if _tvm.as_int(begin_e) is not None and int(begin_e) < 0:
            raise LayoutError(f"thread range begins at {begin}", hint="begin must be >= 0")
        return Fragment._make(
            self._shape, self._vars, self._forward, self._thread + begin_e, self._rep_var,
            self._replicate, (begin_e, extent_e),
        )  # fmt: skip

    def compose(self, inner: Layout) -> Fragment:
        """The fragment ``x -> self(inner(x))`` (re-index the tile by ``inner``)."""
        if inner.is_fragment:
            raise LayoutError("cannot compose a fragment with a fragment", hint="compose with a Layout")
        mapping = self._composed_inputs(inner)
        index = [_tvm.substitute(e, mapping) for e in self._forward]
        thread = _tvm.substitute(self._thread, mapping)
        return Fragment._make(
            inner.get_input_shape(), inner.get_forward_vars(), index, thread, self._rep_var, self._replicate
        )

    def reshape(self, shape: ShapeLike) -> Fragment:
        """The fragment of this tile seen with another shape, row-major (``T.reshape``).

        Element ``x`` of ``shape`` is this tile's element at the same row-major position,
        held by the same threads in the same local slot, so a reshaped fragment is a view
        of the same registers.

        Example::

            >>> from tile.layout import Fragment
            >>> rows = Fragment([4, 8], forward_fn=lambda i, j: (i, j))  # thread i holds row i
            >>> flat = rows.reshape([32])
            >>> flat.owners((13,)), int(flat.map_forward_index([13])[0])
            ([1], 5)

        Raises:
            LayoutError: the shapes hold different element counts (or are not constant).
        """
        new_dims, old_dims = shape_ints(normalize_shape(shape)), self.const_input_shape()
        if new_dims is None or old_dims is None or math.prod(new_dims) != math.prod(old_dims):
            raise LayoutError(
                f"cannot reshape a fragment of shape {fmt_shape(self._shape)} to "
                f"{fmt_shape(normalize_shape(shape))}",
                hint="a reshape keeps the element count; both shapes must be constant",
            )
        return self.compose(row_major_reshape(new_dims, old_dims))

    # ----------------------------------------------------------------- equality
    def is_equal(self, other: object) -> bool:
        """Same shape, replication, thread map and local-index map."""
        if not isinstance(other, Fragment) or other._replicate != self._replicate:
            return False
        if not shapes_equal(self._shape, other._shape):
            return False
        names = {**dict(zip(other._vars, self._vars, strict=True)), other._rep_var: self._rep_var}
        theirs = [_tvm.substitute(e, names) for e in [other._thread, *other._forward]]
        return self._exprs_equal([self._thread, *self._forward], theirs)

    def __hash__(self) -> int:
        return hash(("Fragment", self.ndim, self._replicate, self.const_input_shape()))

    # ----------------------------------------------------------------- enumeration
    def _table(self) -> tuple[list[_eval.IntArray], list[_eval.IntArray]]:
        domain = self._domain(quiet=False)
        values = self._evaluate_all([self._thread, *self._forward])
        assert domain is not None and values is not None
        return domain, values

    def enumerate(self) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Every ``(coord, local index)`` pair (replica 0), coords row-major."""
        for coord, rep, _thread, local in self.enumerate_threads():
            if rep == 0:
                yield coord, local

    def enumerate_threads(self) -> Iterator[tuple[tuple[int, ...], int, int, tuple[int, ...]]]:
        """Every ``(coord, rep, thread, local index)``; coords row-major, rep fastest."""
        domain, values = self._table()
        coords = np.stack(domain[:-1], axis=1).tolist()
        reps = domain[-1].tolist()
        threads = values[0].tolist()
        locals_ = np.stack(values[1:], axis=1).tolist()
        for c, r, t, loc in zip(coords, reps, threads, locals_, strict=True):
            yield tuple(c), r, t, tuple(loc)

    def owners(self, coord: Sequence[int]) -> list[int]:
        """The sorted distinct threads that hold element ``coord``."""
        self._check_arity(coord, self.ndim, "owners")
        env: dict[Var, Any] = {v: int(c) for v, c in zip(self._vars, coord, strict=True)}
        reps = np.arange(self._replicate, dtype=np.int64)
        env[self._rep_var] = reps
        try:
            (threads,) = _eval.evaluate([self._thread], env, (self._replicate,))
        except _eval.UnsupportedExpr as exc:
            raise LayoutError(f"cannot evaluate the thread of {self}: {exc}") from exc
        return sorted({int(t) for t in threads})

    def ownership_counts(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Number of distinct owner threads of every element (array of the tile's shape)."""
        dims = self.const_input_shape()
        _domain, values = self._table()
        if dims is None:  # pragma: no cover - _table already raised
            raise LayoutError("ownership_counts needs constant shapes")
        size = math.prod(dims)
        per = values[0].reshape(size, self._replicate)
        sorted_threads = np.sort(per, axis=1)
        distinct = 1 + np.count_nonzero(np.diff(sorted_threads, axis=1), axis=1)
        counts: np.ndarray[Any, np.dtype[np.int64]] = distinct.reshape(dims).astype(np.int64)
        return counts

    # ----------------------------------------------------------------- printing
    def __repr__(self) -> str:
        sig = ", ".join(str(v) for v in self._vars)
        if self._replicate > 1:
            sig += f", {self._rep_var} < {self._replicate}"
        index = ", ".join(str(e) for e in self._forward)
        rng = ""
        if self._thread_range is not None:
            rng = f", threads [{self._thread_range[0]}, +{self._thread_range[1]})"
        return (
            f"Fragment({fmt_shape(self._shape)} -> {fmt_shape(self.get_output_shape())} locals x "
            f"{self.get_thread_size()} threads{rng}: ({sig}) -> thread={self._thread}, index=({index}))"
        )


def make_fully_replicated(shape: ShapeLike, threads: int) -> Fragment:
    """Every thread of ``threads`` holds the whole tile (row-major local index).

    Example::

        >>> from tile.layout import make_fully_replicated
        >>> f = make_fully_replicated([4], 8)
        >>> f.owners((2,)), f.locals_per_thread()
        ([0, 1, 2, 3, 4, 5, 6, 7], 4)
    """
    dims = normalize_shape(shape)
    count = _check_count(threads, "threads")

    def index(*v: Var) -> PrimExpr:
        return row_major_linearize(list(v), dims)

    if count == 1:
        return Fragment(dims, forward_thread_fn=lambda *v: 0, forward_index_fn=index)
    return Fragment(dims, forward_thread_fn=lambda *v: v[-1], forward_index_fn=index, replicate=count)


def make_linear_fragment(shape: ShapeLike, threads: int) -> Fragment:
    """T.Parallel-style binding: row-major element ``e`` -> thread ``e % T``, local ``e // T``.

    Example::

        >>> from tile.layout import make_linear_fragment
        >>> f = make_linear_fragment([4, 8], 16)
        >>> int(f.map_forward_thread([1, 2])), int(f.map_forward_index([1, 2])[0])
        (10, 0)
    """
    dims = normalize_shape(shape)
    count = _check_count(threads, "threads")
    total = shape_ints(dims)
    if total is not None and math.prod(total) % count != 0:
        raise LayoutError(
            f"{math.prod(total)} elements do not split evenly over {count} threads",
            hint="pick a thread count that divides the tile size",
        )

    def fn(*v: Var) -> tuple[PrimExpr, PrimExpr]:
        e = row_major_linearize(list(v), dims)
        return _tvm.floormod(e, count), _tvm.floordiv(e, count)

    return Fragment(dims, forward_fn=fn)
