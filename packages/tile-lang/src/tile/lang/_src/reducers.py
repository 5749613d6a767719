"""``T.alloc_reducer``: a tile that the threads of a block combine into, and its epochs.

A reducer lives in shared memory; each update is an atomic update of one element, so the
threads a ``T.Parallel`` loop is spread over may all combine into the same element. Two
ways of using one, as in TileLang:

* An *epoch* (TileLang's reducer v2): ``T.reducer_init(R[, start])`` opens it,
  ``T.reducer_update(R[i], v)`` inside ``T.Parallel`` loops combines, and
  ``T.finalize_reducer(R[, dst])`` closes it (a barrier; then ``R`` holds the result and
  ``dst`` a copy). Between init and finalize the partial values are not to be read or
  stored: those are refused, with the other misuses of the lifecycle (an update before the
  init, an init twice, a finalize outside the init's loops, an epoch never finalized).
* Plain updates (reducer v1): ``T.clear(R)``, then ``R[i] += v`` / ``R[i] = T.max(R[i], v)``
  in ``T.Parallel`` loops (each becomes the atomic update), then ``T.finalize_reducer(R)``.

Example::

    R = T.alloc_reducer((block_M,), "float32", op="sum")
    T.reducer_init(R)
    for i, j in T.Parallel(block_M, block_N):
        T.reducer_update(R[i], A_frag[i, j])
    T.finalize_reducer(R, row_sums)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.script.ir_builder.base import IRBuilder  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]
from tvm.tirx.script.builder.frame import ForFrame  # type: ignore[import-untyped]

from tile.ir.errors import SourceLocation, location_from_span
from tile.ir.ops import Atomic, Copy, Fill, reduce_identity

from ..errors import ArgumentAssertionError, ArgumentTypeError, TileScopeError, TileTypeError
from .builtins import _alloc, _emit, copy
from .dtypes import dtype_name, shape_list
from .session import current_location, current_session

REDUCER_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_BITWISE = ("bitand", "bitor", "bitxor")
_ATOMIC = {"sum": "add", "max": "max", "min": "min", "bitand": "and", "bitor": "or", "bitxor": "xor"}
_EPOCH_MARK = "tile_reducer_epoch"
"""``call_extern("int32", _EPOCH_MARK, "init" | "finalize", reducer)``: where an epoch opens and
closes in the parsed body, for the check of the accesses between; removed when parsing ends."""


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: Any = None) -> Any:
    """A tile that threads combine into with ``op`` ("sum", "max", "min"; "bitand", "bitor",
    "bitxor" for integers), in shared memory."""
    if op not in REDUCER_OPS:
        raise TileTypeError(
            f"T.alloc_reducer(op={op!r}): tile's reducers combine by {', '.join(REDUCER_OPS)}",
            hint="pass one of those",
        )
    if op in _BITWISE and not dtype_name(dtype).startswith(("int", "uint")):
        raise ArgumentAssertionError(
            f"T.alloc_reducer(op={op!r}) needs an integer dtype, got {dtype_name(dtype)}",
            hint="reduce int32/uint32 values bitwise (T.reinterpret floats first)",
        )
    buffer = _alloc("T.alloc_reducer", shape_list(shape), dtype_name(dtype), "shared")
    _Reducers.of_kernel().reducers.append(_Reducer(buffer, op))
    return buffer


@dataclasses.dataclass
class _Epoch:
    loops: list[Any]
    """The loop frames around the ``T.reducer_init`` (its scope)."""
    location: SourceLocation | None
    open: bool = True


@dataclasses.dataclass
class _Reducer:
    buffer: Any
    op: str
    epoch: _Epoch | None = None
    """The last epoch; ``None`` for a reducer never given a ``T.reducer_init`` (plain updates)."""


def _loops() -> list[Any]:
    return [f for f in IRBuilder.current().frames if isinstance(f, ForFrame)]


def _same_loops(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x.same_as(y) for x, y in zip(a, b, strict=True))


def _line(location: SourceLocation | None) -> str:
    return f" at line {location.line}" if location is not None else ""


class _Reducers:
    """The reducers of the kernel being parsed. Once parsing ends, checks the accesses inside
    each epoch and rewrites plain updates: ``R[i] = R[i] + v`` (and max/min, bitwise) -> atomic
    updates, and a barrier after each ``T.clear``/``T.fill``/``T.reducer_init`` of a reducer,
    so no thread combines into a tile not yet set."""

    def __init__(self) -> None:
        self.reducers: list[_Reducer] = []

    @classmethod
    def of_kernel(cls, construct: str = "T.alloc_reducer") -> _Reducers:
        rewrites = current_session(construct).body_rewrites
        found = next((r for r in rewrites if isinstance(r, _Reducers)), None)
        if found is None:
            found = cls()
            rewrites.append(found)
        return found

    def find(self, buffer: Any) -> _Reducer | None:
        return next((r for r in self.reducers if buffer is not None and r.buffer.same_as(buffer)), None)

    def index(self, buffer: Any) -> int | None:
        return next((i for i, r in enumerate(self.reducers) if r.buffer.same_as(buffer)), None)

    def __call__(self, body: Any) -> Any:
        for reducer in self.reducers:
            if reducer.epoch is not None and reducer.epoch.open:
                raise TileScopeError(
                    f"the epoch of reducer {reducer.buffer.name} opened by T.reducer_init"
                    f"{_line(reducer.epoch.location)} is never finalized",
                    hint=f"call T.finalize_reducer({reducer.buffer.name}, dst) in the same loop as the init, "
                    "after the updates",
                    location=reducer.epoch.location,
                )
        _EpochAccesses(self).visit(body)
        return self._rewrite(body)

    def _rewrite(self, body: Any) -> Any:
        def on_store(store: Any) -> Any:
            reducer = self.find(store.buffer)
            contribution = None if reducer is None else _contribution(store, reducer.op)
            if reducer is None or contribution is None:
                return store
            target = tirx.BufferLoad(store.buffer, list(store.indices))
            return tirx.Evaluate(Atomic.build(_ATOMIC[reducer.op], target, contribution).encode())

        def on_evaluate(stmt: Any) -> Any:
            call = stmt.value
            if not (_is_op(call, Fill.op_name) and self.find(Fill.decode(call).dst.buffer) is not None):
                return stmt
            return tirx.SeqStmt([stmt, tirx.Evaluate(_barrier())])

        def on_seq(seq: Any) -> Any:
            kept = [s for s in seq.seq if _epoch_mark(s) is None]
            if len(kept) == len(seq.seq):
                return seq
            return tirx.Evaluate(0) if not kept else kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

        body = tvm_ffi.structural_map(body, [(tirx.SeqStmt, on_seq)])
        return tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store), (tirx.Evaluate, on_evaluate)])


class _EpochAccesses:
    """Walks a parsed body in program order and refuses a plain store to a reducer used with
    epochs, and a read of one while its epoch is open (its elements hold partial values)."""

    def __init__(self, reducers: _Reducers) -> None:
        self.reducers = reducers
        self.open: set[int] = set()

    def visit(self, stmt: Any) -> None:
        if isinstance(stmt, tirx.BufferStore):
            self._store(stmt)
        elif isinstance(stmt, tirx.Evaluate):
            self._evaluate(stmt)
        elif isinstance(stmt, tirx.Bind):
            self._reads([stmt.value], stmt)
        else:
            if isinstance(stmt, tirx.IfThenElse):
                self._reads([stmt.condition], stmt)
            for child in _nested(stmt):
                self.visit(child)

    def _store(self, stmt: Any) -> None:
        reducer = self.reducers.find(stmt.buffer)
        if reducer is not None and reducer.epoch is not None:
            raise TileScopeError(
                f"illegal store to reducer {reducer.buffer.name}: it is combined into with "
                "T.reducer_update between T.reducer_init and T.finalize_reducer",
                hint=f"write T.reducer_update({reducer.buffer.name}[i], value) inside a T.Parallel loop",
                location=location_from_span(stmt.span),
            )
        self._reads([stmt.value, *stmt.indices], stmt)

    def _evaluate(self, stmt: Any) -> None:
        mark = _epoch_mark(stmt)
        if mark is not None:
            kind, index = mark
            (self.open.add if kind == "init" else self.open.discard)(index)
            return
        call = stmt.value
        if _is_op(call, Copy.op_name):
            self._read_of(Copy.decode(call).src.buffer, stmt)
        elif not _is_tile_op(call):
            self._reads([call], stmt)  # other tile ops: their operands are regions, not reads

    def _reads(self, exprs: list[Any], stmt: Any) -> None:
        found: list[Any] = []
        tvm_ffi.structural_walk(exprs, (TensorLoad, lambda load: found.append(load.source)))
        for buffer in found:
            self._read_of(buffer, stmt)

    def _read_of(self, buffer: Any, stmt: Any) -> None:
        index = self.reducers.index(buffer)
        if index is not None and index in self.open:
            name = self.reducers.reducers[index].buffer.name
            raise TileScopeError(
                f"illegal read of reducer {name} before T.finalize_reducer: its elements hold "
                "partial values until then",
                hint=f"read the result after T.finalize_reducer({name}, dst), from dst or {name}",
                location=location_from_span(stmt.span),
            )


def _nested(stmt: Any) -> list[Any]:
    """The statements directly inside ``stmt``, in program order."""
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, tirx.IfThenElse):
        return [stmt.then_case] if stmt.else_case is None else [stmt.then_case, stmt.else_case]
    if isinstance(stmt, tirx.For | tirx.While | tirx.AttrStmt):
        return [stmt.body]
    return []


def _is_tile_op(call: Any) -> bool:
    return isinstance(call, ir.Call) and isinstance(call.op, ir.Op) and str(call.op.name).startswith("tile.")


def _is_op(call: Any, name: str) -> bool:
    return isinstance(call, ir.Call) and isinstance(call.op, ir.Op) and str(call.op.name) == name


def _epoch_mark(stmt: Any) -> tuple[str, int] | None:
    if not isinstance(stmt, tirx.Evaluate) or not _is_op(stmt.value, "tirx.call_extern"):
        return None
    args = stmt.value.args
    if str(args[0].value) != _EPOCH_MARK:
        return None
    return str(args[1].value), int(args[2].value)


def _mark(kind: str, index: int) -> None:
    B.evaluate(tirx.call_extern("int32", _EPOCH_MARK, kind, index))


def _barrier() -> Any:
    return tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared")


def _reducer_of(buffer: Any, name: str) -> tuple[_Reducers, _Reducer]:
    reducers = _Reducers.of_kernel(name)
    reducer = reducers.find(buffer)
    if reducer is None:
        raise TileTypeError(
            f"{name} takes a buffer from T.alloc_reducer", hint="R = T.alloc_reducer(shape, dtype, op='sum')"
        )
    return reducers, reducer


def reducer_init(reducer: Any, init: Any = None) -> None:
    """Open an epoch of ``reducer``: every element is ``op``'s identity, or ``init`` (a Python
    number, or a value of the reducer's dtype, taken at this point)."""
    reducers, found = _reducer_of(reducer, "T.reducer_init")
    name, want = found.buffer.name, str(found.buffer.dtype)
    if isinstance(init, ir.Expr) and str(init.ty) != want:
        raise ArgumentTypeError(
            f"T.reducer_init({name}, ...): the starting value is {init.ty}, which does not match "
            f"reducer {name}'s dtype {want}",
            hint=f"cast it: T.cast(value, {want!r}), or pass a Python number",
        )
    loops = _loops()
    if found.epoch is not None and found.epoch.open and _same_loops(found.epoch.loops, loops):
        raise TileScopeError(
            f"double T.reducer_init of {name}: the epoch opened{_line(found.epoch.location)} "
            "is not finalized",
            hint=f"call T.finalize_reducer({name}, dst) before opening another epoch",
        )
    found.epoch = _Epoch(loops, current_location())
    _emit(Fill.build(reducer, reduce_identity(found.op, want) if init is None else init))
    _mark("init", reducers.reducers.index(found))


def reducer_update(target: Any, value: Any) -> None:
    """Combine ``value`` into the element ``target`` (``T.reducer_update(R[i], v)``), inside a
    ``T.Parallel`` loop of an open epoch."""
    _, found = _reducer_of(getattr(target, "source", None), "T.reducer_update")
    name = found.buffer.name
    loops = _loops()
    parallel = current_session("T.reducer_update").parallel_vars
    if not any(v.same_as(p) for f in loops for v in f.vars for p in parallel):
        raise TileScopeError(
            f"T.reducer_update of {name} outside any T.Parallel loop: which threads contribute is "
            "not defined there",
            hint="put the update in a `for i in T.Parallel(n):` loop over the contributions",
        )
    epoch = found.epoch
    if epoch is None or not epoch.open:
        raise TileScopeError(
            f"T.reducer_update of {name} before T.reducer_init (no epoch of {name} is open here)",
            hint=f"call T.reducer_init({name}) first (T.clear starts plain `{name}[i] += v` updates instead)",
        )
    if not _same_loops(epoch.loops, loops[: len(epoch.loops)]):
        raise TileScopeError(
            f"T.reducer_update of {name} is not in the scope of its T.reducer_init{_line(epoch.location)}",
            hint="update inside the loops the init is in",
        )
    _emit(Atomic.build(_ATOMIC[found.op], target, value))


def finalize_reducer(reducer: Any, dst: Any = None, batch: int = 1, annotations: Any = None) -> None:
    """Wait for every thread's updates of ``reducer`` (closing its epoch); copy the result into
    ``dst`` if given."""
    reducers, found = _reducer_of(reducer, "T.finalize_reducer")
    epoch = found.epoch
    if epoch is not None:
        name = found.buffer.name
        if not epoch.open:
            raise TileScopeError(
                f"T.finalize_reducer of {name} without an open epoch: the one opened"
                f"{_line(epoch.location)} is already finalized",
                hint=f"call T.reducer_init({name}) to open another epoch",
            )
        if not _same_loops(epoch.loops, _loops()):
            raise TileScopeError(
                f"T.finalize_reducer of {name} is not in the scope of its T.reducer_init"
                f"{_line(epoch.location)}: a finalize in other loops would run once per other iteration",
                hint="finalize in the same loop as the init (a uniform `if` around it is fine)",
            )
        epoch.open = False
    B.evaluate(_barrier())
    if epoch is not None:
        _mark("finalize", reducers.reducers.index(found))
    if dst is not None:
        copy(reducer, dst)


def _contribution(store: Any, op: str) -> Any:
    """``v`` of ``R[i] = R[i] + v`` / ``v + R[i]`` / ``max(R[i], v)``; None for other stores."""
    value = store.value
    kinds = {
        "sum": tirx.Add,
        "max": tirx.Max,
        "min": tirx.Min,
        "bitand": tirx.BitwiseAnd,
        "bitor": tirx.BitwiseOr,
        "bitxor": tirx.BitwiseXor,
    }
    if not isinstance(value, kinds[op]):
        return None

    def is_self(expr: Any) -> bool:
        return (
            isinstance(expr, TensorLoad)
            and expr.source.same_as(store.buffer)
            and all(tvm_ffi.structural_equal(a, b) for a, b in zip(expr.indices, store.indices, strict=True))
        )

    if is_self(value.a):
        return value.b
    if is_self(value.b):
        return value.a
    return None
