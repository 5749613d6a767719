"""TileLang's persistent-kernel loops, tile schedulers and schedule annotations.

``T.Persistent`` and ``T.PersistentTileScheduler`` let a grid of ``W`` blocks walk a
larger grid of tiles: block ``b`` takes tiles ``b, b + W, b + 2W, ...`` of a linear
order (with L2-friendly panels), so every tile is visited once. They build ordinary
loops and index arithmetic, so every backend runs them.

``T.annotate_ws_schedule`` and the ``T.WS*`` schedule objects describe how TileLang
should split a kernel into warp roles. tile checks their form and keeps them on the
kernel but schedules warps itself: the kernel's statements already say what it
computes, and the schedule only says which warps do it.

Example::

    with T.Kernel(num_workers, threads=128) as block_id:
        for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], num_workers, block_id):
            ...compute tile (bx, by)...
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.ops import REGION_OP, Copy, decode, op_class_of
from tile.ir.ops.copy import copy_nest

from ..errors import TileTypeError
from .builtins import _alloc, _kernel, ceildiv
from .dtypes import TensorProxy
from .session import current_session


def _product(values: Sequence[Any]) -> Any:
    total: Any = 1
    for value in values:
        total = total * value
    return total


def _panel_coord(tile: Any, fast_extent: Any, slow_extent: Any, panel: Any) -> tuple[Any, Any]:
    """``(fast, slow)`` of linear ``tile`` when the slow axis is cut into panels of ``panel``
    tiles and each panel is swept along the fast axis, the panel's tiles side by side."""
    per_panel = fast_extent * panel
    first = tirx.floordiv(tile, per_panel) * panel
    width = _script.max(1, _script.min(panel, slow_extent - first))  # the last panel may be narrower
    within = tile - tirx.floordiv(tile, per_panel) * per_panel
    return tirx.floordiv(within, width), first + tirx.floormod(within, width)


def Persistent(domain: Sequence[Any], wave_size: Any, index: Any, group_size: Any = 8) -> Any:
    """``for c0, c1, ... in T.Persistent(domain, wave_size, index, group_size=8)``: the body
    runs for each tile of ``domain`` that block ``index`` (of ``wave_size`` blocks) owns.

    Tiles are numbered in panels of ``group_size`` along the last dimension (neighbouring
    blocks share rows of the operands in cache); block ``index`` takes numbers ``index``,
    ``index + wave_size``, ... and skips those past the domain. The loop is parsed as a
    grid over ``domain`` and then rewritten into that wave loop.
    """
    domain = list(domain)
    if not domain:
        raise TileTypeError(
            "T.Persistent needs a tile domain", hint="T.Persistent([tiles_m, tiles_n], num_blocks, bid)"
        )
    grid = B.grid(*domain)
    group = 1 if group_size is None else group_size
    current_session("T.Persistent").body_rewrites.append(
        lambda body: _waves(body, list(grid.vars), domain, wave_size, index, group)
    )
    return grid


def _waves(
    body: Any, coord_vars: list[Any], domain: list[Any], wave_size: Any, index: Any, group: Any
) -> Any:
    """Replace the grid nest over ``coord_vars`` by a loop over this block's waves of tiles."""

    def on_for(loop: Any) -> Any:
        if not loop.loop_var.same_as(coord_vars[0]):
            return loop
        inner = loop
        for _ in coord_vars[1:]:
            inner = inner.body
        wave = tirx.Var("wave", "int32")
        tile = wave * wave_size + index
        last = domain[-1]
        lead, column = _panel_coord(
            tile, _product(domain[:-1]), last, _script.max(1, _script.min(group, last))
        )
        coords: list[Any] = []
        for extent in reversed(domain[:-1]):
            coords.append(tirx.floormod(lead, extent))
            lead = tirx.floordiv(lead, extent)
        binds = [tirx.Bind(v, c) for v, c in zip(coord_vars, [*reversed(coords), column], strict=True)]
        guarded = tirx.IfThenElse(tile < _product(domain), tirx.SeqStmt([*binds, inner.body]), None)
        waves = ceildiv(_product(domain), wave_size)
        return tirx.For(wave, 0, waves, tirx.ForKind.SERIAL, guarded, None, {})

    return tvm_ffi.structural_map(body, (tirx.For, on_for))


class PersistentTileScheduler:
    """A grid of ``num_workers`` blocks (default: the kernel's grid) walking
    ``num_m_tiles x num_n_tiles`` tiles, worker ``w`` taking linear tiles ``w, w + W, ...``.

    ``column_major`` sweeps M fastest; ``swizzle_size`` groups the slow axis into panels;
    ``cluster_size`` groups M tiles (``m_idx`` is then the group). ``init(worker)``,
    ``valid()``, ``next_tile()``, ``m_idx``/``n_idx``/``linear_idx``/``current_iter`` drive
    a ``while`` loop; ``coord(tile)`` decodes a tile number without state.
    """

    _is_meta_class = True
    """TVMScript binds it as a Python value: ``sched = T.PersistentTileScheduler(...)``."""

    def __init__(
        self,
        num_m_tiles: Any,
        num_n_tiles: Any,
        num_workers: Any = None,
        swizzle_size: int = 1,
        column_major: bool = True,
        cluster_size: int = 1,
        stateful: bool = True,
        name: str | None = None,
    ) -> None:
        if num_workers is None:
            kernel = _kernel("T.PersistentTileScheduler")
            num_workers = ceildiv(_product(kernel.grid), cluster_size)
        self.num_workers, self.swizzle_size, self.cluster_size = num_workers, swizzle_size, cluster_size
        m_groups = ceildiv(num_m_tiles, cluster_size)
        self.total_tiles = m_groups * num_n_tiles
        self._column_major = column_major
        self._fast, self._slow = (m_groups, num_n_tiles) if column_major else (num_n_tiles, m_groups)
        self._state = (
            [_alloc("T.PersistentTileScheduler", [1], "int32", "local") for _ in range(4)] if stateful else []
        )

    def coord(self, tile_id: Any) -> tuple[Any, Any]:
        """``(m, n)`` of linear tile ``tile_id``."""
        fast, slow = _panel_coord(tile_id, self._fast, self._slow, self.swizzle_size)
        return (fast, slow) if self._column_major else (slow, fast)

    def _cell(self, k: int) -> Any:
        if not self._state:
            raise TileTypeError(
                "this T.PersistentTileScheduler was made with stateful=False",
                hint="use sched.coord(tile) in your own loop, or make it stateful",
            )
        return self._state[k]

    m_idx = property(lambda self: self._cell(0)[0], doc="The current tile's row (M index).")
    n_idx = property(lambda self: self._cell(1)[0], doc="The current tile's column (N index).")
    linear_idx = property(lambda self: self._cell(2)[0], doc="This worker's current linear tile number.")
    current_iter = property(lambda self: self._cell(3)[0], doc="How many tiles this worker has passed.")

    def _move_to(self, linear: Any, iteration: Any) -> None:
        B.buffer_store(self._cell(3), iteration, [0])
        B.buffer_store(self._cell(2), linear, [0])
        m, n = self.coord(self._cell(2)[0])
        B.buffer_store(self._cell(0), m, [0])
        B.buffer_store(self._cell(1), n, [0])

    def init(self, worker_id: Any) -> None:
        """Start worker ``worker_id`` at its first tile."""
        self._move_to(worker_id, 0)

    def next_tile(self) -> None:
        """Advance to this worker's next tile."""
        self._move_to(self.linear_idx + self.num_workers, self.current_iter + 1)

    def valid(self) -> Any:
        """Whether the current tile is inside the grid."""
        return self.linear_idx < self.total_tiles


PrimExpr = ir.Expr
"""``T.PrimExpr``: the type of scalar expressions, for annotations."""

Var = tirx.Var
"""``T.Var``: the type of scalar variables (symbolic dims are ones: ``isinstance(M, T.Var)``);
``T.Var("x", T.int32)`` makes one."""


class _ScopedTensor(TensorProxy):
    def __init__(self, scope: str) -> None:
        self.scope = scope

    def __call__(self, shape: Any, dtype: Any = "float32", data: Any = None, **kwargs: Any) -> Any:
        kwargs.setdefault("scope", self.scope)
        return super().__call__(shape, dtype, data, **kwargs)


SharedBuffer = _ScopedTensor("shared.dyn")
"""``T.SharedBuffer(shape, dtype)``: the annotation of a shared-memory tile (macro parameters)."""
FragmentBuffer = _ScopedTensor("local.fragment")
"""``T.FragmentBuffer(shape, dtype)``: the annotation of a register fragment (macro parameters)."""


# ---------------------------------------------------------------- schedule annotations
WSID = "tl.ws_op_id"
"""The annotation key naming an op or loop in a warp-specialization schedule
(``T.copy(..., annotations={T.WSID: "load_A"})``); tile keeps it on loops as is."""


def annotate_safe_value(safe_value_map: dict[Any, Any]) -> None:
    """``T.annotate_safe_value({A: v})``: an element read of tensor ``A`` outside its bounds
    gives ``v`` (the read is guarded: it does not touch memory), and so does a ``T.copy`` from
    ``A`` (it runs as a guarded ``T.Parallel`` loop, not a bulk copy, whose hardware fills
    zeros). Reads inside ``A`` are unchanged; the annotation holds for the whole kernel."""
    if not isinstance(safe_value_map, dict) or not all(tirx.is_buffer_var(b) for b in safe_value_map):
        raise TileTypeError(
            "T.annotate_safe_value takes a dict {buffer: value}", hint="T.annotate_safe_value({A: 0})"
        )
    session = current_session("T.annotate_safe_value")
    session.body_rewrites.append(_SafeValues(list(safe_value_map.items())))


class _SafeValues:
    """Once parsing ends: each ``T.copy`` from a buffer with a safe value becomes guarded
    loops, and each element load of it ``if_then_else(indices in bounds, load, value)``."""

    def __init__(self, values: list[tuple[Any, Any]]) -> None:
        self.values = values

    def __call__(self, body: Any) -> Any:
        body = tvm_ffi.structural_map(body, (tirx.Evaluate, self._copy_as_loops))
        corners: list[Any] = []  # a tile operator's region names its corner with a load: kept

        def on_region(call: Any) -> None:
            if isinstance(call.op, ir.Op) and str(call.op.name) == REGION_OP:
                corners.append(call.args[0])

        tvm_ffi.structural_walk(body, (ir.Call, on_region))

        def on_load(load: Any) -> Any:
            buffer = load.source
            value = next((v for b, v in self.values if b.same_as(buffer)), None)
            shape = list(buffer.shape)
            if value is None or len(load.indices) != len(shape) or any(load.same_as(c) for c in corners):
                return load
            inside = [
                tirx.all(index >= 0, index < extent)
                for index, extent in zip(load.indices, shape, strict=True)
                if isinstance(index, ir.Expr)
            ]
            dtype = str(buffer.dtype)
            fallback = value if isinstance(value, ir.Expr) else tirx.const(value, dtype)
            if not inside:
                return load
            return tirx.if_then_else(tirx.all(*inside), load, tirx.Cast(dtype, fallback))

        return tvm_ffi.structural_map(body, (ir.TensorLoad, on_load))

    def _copy_as_loops(self, stmt: Any) -> Any:
        """A ``T.copy`` from a buffer with a safe value, as the guarded loops it lowers to
        anyway where no bulk copy applies, with the safe value where the read is outside."""
        if op_class_of(stmt.value) is not Copy:
            return stmt
        op = decode(stmt.value)
        assert isinstance(op, Copy)
        value = next((v for b, v in self.values if b.same_as(op.src.buffer)), None)
        if value is None:
            return stmt
        fallback = value if isinstance(value, ir.Expr) else tirx.const(value, op.src.dtype)
        return copy_nest(op, tvm.sym.Analyzer(), outside=tirx.Cast(op.src.dtype, fallback))


def annotate_restrict_buffers(*buffers: Any) -> None:
    """TileLang's hint that these buffers may alias; tile's code never assumes otherwise for
    buffers the program reaches through another name."""
    for buffer in buffers:
        if not tirx.is_buffer_var(buffer):
            raise TileTypeError(
                f"T.annotate_restrict_buffers takes buffers, got {type(buffer).__name__}",
                hint="pass the kernel's tensor parameters",
            )


class WSSyncKind(enum.Enum):
    """How a warp role uses a pipeline stage."""

    PRODUCER_ACQUIRE = 0
    PRODUCER_COMMIT = 1
    CONSUMER_WAIT = 2
    CONSUMER_RELEASE = 3


class _Node:
    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"T.{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]


class WSRole(_Node):
    """A warp role: warps ``[warps_lo, warps_hi)`` with a register budget."""

    def __init__(self, name: str, *, warps_lo: int, warps_hi: int, max_nreg: int = 0) -> None:
        if not 0 <= warps_lo < warps_hi:
            raise TileTypeError(
                f"T.WSRole({name!r}): warps [{warps_lo}, {warps_hi}) is empty", hint="warps_lo < warps_hi"
            )
        self.name, self.warps_lo, self.warps_hi, self.max_nreg = name, warps_lo, warps_hi, max_nreg


class WSPipeline(_Node):
    """Buffers versioned ``depth`` times between a producer and a consumer role."""

    def __init__(self, name: str, buffers: Sequence[Any], depth: int) -> None:
        if depth < 1:
            raise TileTypeError(f"T.WSPipeline({name!r}) depth {depth}", hint="depth >= 1")
        self.name, self.buffers, self.depth = name, list(buffers), depth


class WSSync(_Node):
    """One synchronisation step of a role's program on a pipeline stage."""

    def __init__(self, kind: WSSyncKind, pipeline: str, stage: int = 0) -> None:
        self.kind, self.pipeline, self.stage = WSSyncKind(kind), pipeline, stage


def _sync_step(kind: WSSyncKind) -> Any:
    def make(cls: type[WSSync], pipeline: str, stage: int = 0) -> WSSync:
        return cls(kind, pipeline, stage)

    make.__doc__ = f"A {kind.name.lower()} step on ``pipeline``'s ``stage``."
    return classmethod(make)


for _kind in WSSyncKind:  # WSSync.producer_acquire(pipeline, stage), ...
    setattr(WSSync, _kind.name.lower(), _sync_step(_kind))


class WSScope(_Node):
    """Each role's steps (op ids and ``WSSync``s) inside one loop scope."""

    ROOT = "tl.ws_scope_root"

    def __init__(self, id: str, bodies: dict[str, list[Any]]) -> None:
        for role, steps in bodies.items():
            for step in steps:
                if not isinstance(step, str | WSSync):
                    raise TileTypeError(
                        f"T.WSScope({id!r}) role {role!r}: a step is an op id or a T.WSSync, got {step!r}",
                        hint="list op ids (strings) and T.WSSync.* steps",
                    )
        self.id, self.bodies = id, {role: list(steps) for role, steps in bodies.items()}


class WSSchedule(_Node):
    """Roles, pipelines and per-scope programs of a warp-specialized kernel."""

    def __init__(
        self,
        num_warps: int,
        roles: Sequence[WSRole],
        pipelines: Sequence[WSPipeline],
        scopes: Sequence[WSScope],
    ) -> None:
        names = {role.name for role in roles}
        for scope in scopes:
            unknown = set(scope.bodies) - names
            if unknown:
                raise TileTypeError(
                    f"T.WSSchedule: scope {scope.id!r} names roles {sorted(unknown)} that are not declared",
                    hint=f"declare them with T.WSRole (declared: {sorted(names)})",
                )
        self.num_warps, self.roles, self.pipelines, self.scopes = (
            num_warps,
            list(roles),
            list(pipelines),
            list(scopes),
        )


def annotate_ws_schedule(schedule: WSSchedule) -> None:
    """Accept TileLang's warp-specialization schedule for the kernel (its form is checked;
    tile's compiler assigns warps itself)."""
    if not isinstance(schedule, WSSchedule):
        raise TileTypeError(
            f"T.annotate_ws_schedule takes a T.WSSchedule, got {type(schedule).__name__}",
            hint="build one with T.WSSchedule(num_warps, roles, pipelines, scopes)",
        )
    _kernel("T.annotate_ws_schedule")


class ws_op:  # TileLang's lower-case name: ``with T.ws_op("id"):``
    """``with T.ws_op("id"):`` names the enclosed statements for a warp-specialization
    schedule; the statements run as written."""

    def __init__(self, op_id: str) -> None:
        if not isinstance(op_id, str) or not op_id:
            raise TileTypeError("T.ws_op needs a non-empty id string", hint='with T.ws_op("load_A"): ...')
        self.op_id = op_id

    def __enter__(self) -> None:
        _kernel("T.ws_op")

    def __exit__(self, *exc: Any) -> None:
        return None
