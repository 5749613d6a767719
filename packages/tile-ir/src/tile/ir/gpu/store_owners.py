"""Which thread of a block stores to each shared-memory element a store reaches.

The barrier plan (:mod:`tile.ir.gpu.barriers`) orders two stores to one element from two
threads (a ``T.fill`` then a ``T.copy`` over it). A :class:`Reach` describes the elements
one store reaches over the thread index and the constant-range loops around it;
:func:`owners` enumerates them with numpy; :func:`meet_across_threads` says whether two
stores may reach an element from different threads.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from tvm import tirx  # type: ignore[import-untyped]

from ..transform._thread_values import grid_values

GRID_LIMIT = 1 << 18
"""The most (thread, loop value, lane) points :func:`owners` enumerates for one store."""


@dataclasses.dataclass(frozen=True, eq=False)
class Reach:
    """The elements a store reaches: ``first .. first + lanes - 1`` (flattened) at each value of
    the thread index (``thread``; None in a one-thread block) for the threads that run it
    (``kept``, a numpy array), and of the constant-range loops around it (``loops``: ``(var,
    min, extent)``, outermost first); a block of several thread dims has one linear index
    (``barriers._Planner._reach_of_linear_thread``). None in ``kept`` or ``loops``: not
    enumerable (a condition on something but the thread index, a loop without a constant
    range)."""

    first: Any
    lanes: int
    thread: Any
    kept: Any
    loops: tuple[tuple[Any, int, int], ...] | None


Owners = tuple[Any, Any]
"""The elements a store reaches (sorted, unique) and the thread storing to each (-1 where
several threads do), two numpy arrays."""


def owners(reach: Reach) -> Owners | None:
    """The elements ``reach`` covers and who stores to them; None when it cannot be
    enumerated or the grid is larger than :data:`GRID_LIMIT`.

    >>> t, i = tirx.Var("t", "int32"), tirx.Var("i", "int32")
    >>> elements, owner = owners(Reach(t * 2 + i, 1, t, np.arange(4), ((i, 0, 2),)))
    >>> elements.tolist(), owner.tolist()
    ([0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 1, 1, 2, 2, 3, 3])
    >>> owners(Reach(t // 2, 1, t, np.arange(4), ()))[1].tolist()  # two threads per element
    [-1, -1]
    """
    if reach.loops is None or reach.kept is None:
        return None
    axes = [(reach.thread, 0, int(reach.kept.max(initial=0)) + 1)] if reach.thread is not None else []
    axes += list(reach.loops)
    if math.prod(count for _, _, count in axes) * reach.lanes > GRID_LIMIT:
        return None
    if axes:
        values = grid_values(reach.first, axes)
    elif isinstance(reach.first, tirx.IntImm):
        values = np.array(int(reach.first.value))
    else:
        values = None
    if values is None:
        return None
    # a row per thread that runs the store (one row in a one-thread block)
    values = values[reach.kept] if reach.thread is not None else values.reshape(1, *values.shape)
    threads = reach.kept if reach.thread is not None else np.zeros(1, dtype=np.int64)
    elements = (values.reshape(*values.shape, 1) + np.arange(reach.lanes)).reshape(len(threads), -1)
    flat = elements.reshape(-1)
    if flat.size == 0:  # no thread runs it
        return flat, flat
    owner = np.repeat(threads, elements.shape[1])
    order = np.argsort(flat, kind="stable")
    flat, owner = flat[order], owner[order]
    unique, start = np.unique(flat, return_index=True)
    lowest, highest = np.minimum.reduceat(owner, start), np.maximum.reduceat(owner, start)
    return unique, np.where(lowest != highest, -1, lowest)  # several writers: owned by none


def meet_across_threads(first: Owners, second: Owners) -> bool:
    """Whether some element is stored to by both, from two threads (or by several threads in one).

    >>> a = (np.array([0, 1]), np.array([0, 1]))  # thread 0 stores to 0, thread 1 to 1
    >>> meet_across_threads(a, (np.array([1, 2]), np.array([1, 2])))  # thread 1 again, thread 2
    False
    >>> meet_across_threads(a, (np.array([1]), np.array([0])))  # thread 0 stores to 1
    True
    """
    _, at_first, at_second = np.intersect1d(first[0], second[0], assume_unique=True, return_indices=True)
    owner, other = first[1][at_first], second[1][at_second]
    return bool(np.any((owner < 0) | (other < 0) | (owner != other)))


__all__ = ["GRID_LIMIT", "Owners", "Reach", "meet_across_threads", "owners"]
