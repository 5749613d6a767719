"""A ``@T.prim_func`` that launches several ``T.Kernel`` blocks in turn, or allocates
``T.alloc_global`` scratch before its kernel: one callable over separately compiled kernels.

Split-K decoding is the common case: a first kernel writes partial results to a global
scratch tensor, a second combines them::

    @T.prim_func
    def decode(Q: T.Tensor(...), K: T.Tensor(...), Out: T.Tensor(...)):
        partial = T.alloc_global((batch, splits, dim), "float32")
        with T.Kernel(batch, splits) as (b, s):
            ...  # writes partial[b, s, :]
        with T.Kernel(batch) as b:
            ...  # reads partial[b, :, :], writes Out[b, :]

Each ``T.Kernel`` compiles to a kernel of its own with the function's whole parameter list;
the kernels run in program order on the same tensors (a GPU stream orders them, as two
launches would be). Scratch tensors are trailing parameters (``SCRATCH_PARAMS``) that the
first kernel allocates like outputs at each call; they are not returned.

``T.sync_grid()`` at the top level of a ``T.Kernel`` body (TileLang's persistent kernels: every
block finishes a first phase, then every block starts the second) splits that kernel into two
launches of the same grid: the second sees every write of the first, as after a grid-wide
barrier, without the cooperative launch a barrier inside one kernel needs. The allocations
before it are made again after it; a register, shared or local buffer used on both sides would
lose its contents at the split and is refused, and so is a ``T.sync_grid`` inside a loop or
condition.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.errors import SourceLocation

from ..errors import TileScopeError
from .arguments import ParamSpec, param_specs
from .session import SCRATCH_PARAMS, current_location, current_session

GRID_SYNC = "tile_grid_sync"
"""The marker ``T.sync_grid()`` leaves in the kernel body, where ``kernel_parts`` splits it."""


def sync_grid() -> None:
    """Wait until every block of the grid has reached this point (a grid-wide barrier).

    tile ends the kernel here and launches the rest as a second kernel of the same grid, so
    write it at the top level of the ``T.Kernel`` body, between two phases that share data
    through global tensors only::

        with T.Kernel(blocks, threads=128) as bid:
            ...  # phase 1: writes partial[bid, ...]
            T.sync_grid()
            ...  # phase 2: reads any block's partial[...]
    """
    session = current_session("T.sync_grid")
    if not session.kernels:
        raise TileScopeError(
            "T.sync_grid can only be used inside a `with T.Kernel(...)` block",
            hint="call it at the top level of the kernel body, between the two phases",
        )
    where = current_location()
    B.evaluate(
        tirx.call_extern(
            "void",
            GRID_SYNC,
            ir.StringImm(where.filename if where else ""),
            tirx.const(where.line if where else 0, "int32"),
        )
    )


def _grid_sync_at(stmt: Any) -> SourceLocation | None:
    """Where the user wrote the ``T.sync_grid()`` that ``stmt`` is, or ``None`` if it is not one."""
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    if not isinstance(call, ir.Call) or not call.args:
        return None
    if str(getattr(call.args[0], "value", "")) != GRID_SYNC:
        return None
    filename, line = str(call.args[1].value), int(call.args[2].value)
    return SourceLocation.from_file(filename, line) if filename else SourceLocation("<kernel>", 0)


def _grid_syncs(node: Any) -> list[SourceLocation]:
    found: list[SourceLocation] = []

    def visit(stmt: Any) -> None:
        where = _grid_sync_at(stmt)
        if where is not None:
            found.append(where)

    tvm_ffi.structural_walk(node, (tirx.Evaluate, visit))
    return found


_KEPT_ACROSS = (tirx.AllocBuffer, tirx.DeclBuffer)
"""Statements a later piece of a split kernel repeats: they declare what the rest uses."""


def _pieces(node: Any) -> list[Any]:
    """``node`` cut at its top-level ``T.sync_grid()`` markers (``[node]`` if it has none)."""
    if _grid_sync_at(node) is not None:
        return [tirx.Evaluate(0), tirx.Evaluate(0)]
    syncs = _grid_syncs(node)
    if not syncs:
        return [node]
    if isinstance(node, tirx.AttrStmt):
        return [tirx.AttrStmt(node.node, node.attr_key, node.value, part) for part in _pieces(node.body)]
    if isinstance(node, tirx.LetStmt):
        return [tirx.LetStmt(node.var, node.value, part) for part in _pieces(node.body)]
    if isinstance(node, tirx.SeqStmt):
        pieces: list[list[Any]] = [[]]
        kept: list[Any] = []
        for stmt in node.seq:
            sub = _pieces(stmt)
            pieces[-1].append(sub[0])
            pieces += [[*kept, more] for more in sub[1:]]
            if isinstance(stmt, _KEPT_ACROSS):
                kept.append(stmt)
        return [tirx.SeqStmt(piece) if len(piece) > 1 else piece[0] for piece in pieces]
    raise TileScopeError(
        "T.sync_grid must be at the top level of the T.Kernel body: tile splits the kernel into two "
        "launches there, and a loop or condition around it cannot be split",
        hint="end the loop or condition before T.sync_grid and start a new one after it",
        location=syncs[0],
    )


def _buffers_used(piece: Any) -> list[Any]:
    """The buffers ``piece`` loads, stores or takes the address of."""
    used: list[Any] = []

    def load(node: Any) -> None:
        used.append(node.source)

    def store(node: Any) -> None:
        used.append(node.buffer)

    def pointer(call: Any) -> None:
        name = str(call.op.name) if isinstance(call.op, ir.Op) else ""
        if name == "tirx.buffer_data" and call.args:  # what tvm_access_ptr and address_of hold
            used.append(call.args[0])

    callbacks = [(ir.TensorLoad, load), (tirx.BufferStore, store), (ir.Call, pointer)]
    tvm_ffi.structural_walk(piece, callbacks)
    return used


def _top_level(piece: Any) -> list[Any]:
    """The statements of ``piece`` inside its launch (and ``LetStmt``) wrappers, in order."""
    while isinstance(piece, tirx.AttrStmt | tirx.LetStmt):
        piece = piece.body
    return list(piece.seq) if isinstance(piece, tirx.SeqStmt) else [piece]


def _set_first(piece: Any, buffer: Any) -> bool:
    """Whether ``piece`` sets the one element of ``buffer`` (a scalar ``x = ...``) before any other
    use of it: its value from an earlier launch is then never read."""
    if math.prod(int(getattr(d, "value", d)) for d in buffer.shape) != 1:
        return False
    for stmt in _top_level(piece):
        if isinstance(stmt, _KEPT_ACROSS) or not any(buffer.same_as(b) for b in _buffers_used(stmt)):
            continue
        return (
            isinstance(stmt, tirx.BufferStore)
            and stmt.buffer.same_as(buffer)
            and not any(buffer.same_as(b) for b in _buffers_used(stmt.value))
        )
    return False


def _check_nothing_crosses(pieces: list[Any], where: SourceLocation) -> None:
    """Refuse a buffer of the kernel (registers, shared or local memory) that a launch uses after
    an earlier one did, unless it is a scalar the later launch sets first: its contents do not
    survive the end of a launch."""
    declared: list[Any] = []

    def alloc(stmt: Any) -> None:
        if not any(stmt.buffer.same_as(b) for b in declared):
            declared.append(stmt.buffer)

    for piece in pieces[1:]:  # what a later piece declares again: the kernel's own buffers
        tvm_ffi.structural_walk(piece, (tirx.AllocBuffer, alloc))
    uses = [_buffers_used(piece) for piece in pieces]
    for buffer in declared:
        users = [i for i, used in enumerate(uses) if any(buffer.same_as(b) for b in used)]
        if any(not _set_first(pieces[i], buffer) for i in users[1:]):
            raise TileScopeError(
                f"{buffer.name} is used both before and after T.sync_grid, which splits the kernel "
                "into two launches: its contents do not survive the first one",
                hint=f"pass the values through a global tensor (T.alloc_global), or use {buffer.name} "
                "on one side only",
                location=where,
            )


def _split_at_grid_syncs(kernel: Any) -> list[Any]:
    """``kernel`` (one top-level ``T.Kernel`` statement) as the launches its ``T.sync_grid()``
    calls cut it into."""
    syncs = _grid_syncs(kernel)
    if not syncs:
        return [kernel]
    pieces = _pieces(kernel)
    _check_nothing_crosses(pieces, syncs[0])
    return pieces


def scratch_count(func: Any) -> int:
    """How many trailing parameters of ``func`` are function-scope ``T.alloc_global`` scratch."""
    attrs = getattr(func, "attrs", None)
    return int(attrs[SCRATCH_PARAMS]) if attrs is not None and SCRATCH_PARAMS in attrs else 0


def _is_kernel(stmt: Any) -> bool:
    return (
        isinstance(stmt, tirx.AttrStmt)
        and stmt.attr_key == "thread_extent"
        and str(getattr(stmt.node, "thread_tag", "")).startswith("blockIdx")
    )


def kernel_parts(func: Any) -> list[Any]:
    """One ``PrimFunc`` per top-level ``T.Kernel`` of ``func`` and per launch its top-level
    ``T.sync_grid()`` calls cut it into (each with all its parameters), or ``[]`` when ``func``
    is one kernel with no scratch and no grid sync (the ordinary case)."""
    body = func.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    # function-scope scalars (``input_shape = (num_tokens, dhidden)`` in an eager kernel: a
    # local buffer and its store, or a Bind, each) go with every kernel after them
    kernels: list[tuple[list[Any], Any]] = []
    binds: list[Any] = []
    scalars: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, tirx.AllocBuffer) and str(stmt.buffer.scope()).startswith("local"):
            scalars.add(str(stmt.buffer.name))
            binds.append(stmt)
        elif isinstance(stmt, tirx.Bind) or (
            isinstance(stmt, tirx.BufferStore) and str(stmt.buffer.name) in scalars
        ):
            binds.append(stmt)
        else:
            kernels.append((list(binds), stmt))
    several = len(kernels) > 1 and all(_is_kernel(s) for _, s in kernels)
    if not several and not scratch_count(func) and not _grid_syncs(body):
        return []
    if not several:
        kernels = [([], body)]
    stmts = [
        tirx.SeqStmt([*before, piece]) if before else piece
        for before, stmt in kernels
        for piece in _split_at_grid_syncs(stmt)
    ]
    attrs = {str(k): v for k, v in func.attrs.items() if str(k) != SCRATCH_PARAMS} if func.attrs else {}
    name = str(getattr(func, "__name__", None) or "main")
    parts = []
    for index, stmt in enumerate(stmts):
        part = tirx.PrimFunc(list(func.params), stmt).with_attrs(attrs)
        part.__name__ = name if len(stmts) == 1 else f"{name}_kernel{index}"
        parts.append(part)
    return parts


class KernelSequence:
    """The compiled kernels of one function, called as one kernel (``JITKernel``'s interface:
    ``params``, ``out_idx``, ``get_kernel_source``, ``get_profiler``)."""

    def __init__(self, func: Any, outputs: list[int], compile_part: Callable[[Any, list[int]], Any]) -> None:
        scratch = scratch_count(func)
        every = param_specs(func)
        self.func = func
        self.params: list[ParamSpec] = every[: len(every) - scratch]
        self.out_idx = outputs
        self.name = str(getattr(func, "__name__", None) or "main")
        parts = kernel_parts(func)
        self._total = len(every)
        self._allocated = [*outputs, *range(len(self.params), len(every))]
        self.kernels = [compile_part(parts[0], self._allocated)]
        self.kernels += [compile_part(part, []) for part in parts[1:]]
        first = self.kernels[0]
        self.target = first.target
        self.artifact = first.artifact
        self.device = first.device

    @property
    def input_params(self) -> list[ParamSpec]:
        return [p for i, p in enumerate(self.params) if i not in self.out_idx]

    def __call__(self, *args: Any) -> Any:
        made = self.kernels[0](*args)
        made = () if not self._allocated else made if isinstance(made, tuple) else (made,)
        given = dict(zip(self._allocated, made, strict=True))
        it = iter(args)
        full = [given[i] if i in given else next(it) for i in range(self._total)]
        for kernel in self.kernels[1:]:
            kernel(*full)
        outputs = [full[i] for i in self.out_idx]
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_kernel_source(self, kind: str | None = None, kernel_only: bool = False) -> str:
        """Each kernel's source (``JITKernel.get_kernel_source``), in launch order."""
        return "\n".join(k.get_kernel_source(kind, kernel_only) for k in self.kernels)

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """A ``Profiler`` over the whole sequence."""
        from .profiler import Profiler

        return Profiler(self, tensor_supply_type)

    def run_once(self, func: Any = None) -> Any:
        """Run the kernels (or ``func``) once on inputs the profiler makes."""
        return self.get_profiler().run_once(func)
