"""``T.gemm``: ``C += A @ B`` on tiles (optionally transposed operands, cleared accumulator)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.layout import SwizzledLayout

from ..errors import TileShapeError, TileTypeError, UnsupportedOnTargetError
from .base import LowerContext, TileOp, tile_op
from .layout_rules import (
    LAYOUT_STRICT,
    fragment_through,
    gemm_fragments,
    is_fragment_buffer,
    is_shared_buffer,
    mma_tile,
    region_is_whole,
    shared_operand_layout,
)
from .loops import bind_ranges, cast_to, fresh_vars, parallel_nest
from .region import Region, as_int, extents_match, region_of


def _matrix(value: object, what: str) -> Region:
    region, buf, _ = region_of(value, what)
    if region is None:
        raise TileShapeError(
            f"T.gemm {what} must be a buffer or a slice, got an element of {buf.name}",
            hint=f"pass the whole tile ({buf.name}) or a slice like {buf.name}[0:32, 0:32]",
        )
    if len(region.dense_extents()) != 2 and len(region.extents) != 2:
        raise TileShapeError(
            f"T.gemm {what} {region.name} must be 2-D, it spans {len(region.dense_extents())} dims",
            hint="pass a 2-D shared or fragment buffer",
        )
    return region


def _two(region: Region) -> tuple[ir.Expr, ir.Expr]:
    ext = region.extents if len(region.extents) == 2 else tuple(region.dense_extents())
    return ext[0], ext[1]


WARP_POLICY_SQUARE = 0
"""``T.GemmWarpPolicy.Square``: split the C tile over warps as evenly as possible."""
WARP_POLICY_FULL_ROW = 1
"""``T.GemmWarpPolicy.FullRow``: warps split the rows (each warp spans all columns)."""
WARP_POLICY_FULL_COL = 2
"""``T.GemmWarpPolicy.FullCol``: warps split the columns (each warp spans all rows)."""

DEFAULT_IMPL = "tile"
"""``T.gemm(..., impl="tile")``: tile's own lowering (the default, also ``impl=None``)."""


def _impl_name(impl: object) -> str | None:
    """``impl`` as the op records it: ``None`` for the default, else the backend impl's name."""
    if impl is None or impl == DEFAULT_IMPL:
        return None
    if not isinstance(impl, str) or not impl:
        raise TileTypeError(
            f"T.gemm impl must be a string naming an implementation, got {impl!r}",
            hint='leave it out for tile\'s own lowering, or pass one the target has (impl="cute" on CUDA)',
        )
    return impl


@tile_op
class Gemm(TileOp):
    """``C = A' @ B' (+ C unless clear_accum)`` where ``A'``/``B'`` are optionally transposed.

    Shapes: ``A`` is (M, K) or (K, M) with ``transpose_A``; ``B`` is (K, N) or (N, K)
    with ``transpose_B``; ``C`` is (M, N). Products accumulate in ``C``'s dtype.
    """

    op_name = "tile.gemm"

    def __init__(
        self,
        a: Region,
        b: Region,
        c: Region,
        transpose_a: bool,
        transpose_b: bool,
        clear_accum: bool,
        policy: int = WARP_POLICY_SQUARE,
        impl: str | None = None,
    ) -> None:
        self.a, self.b, self.c = a, b, c
        self.transpose_a, self.transpose_b, self.clear_accum = transpose_a, transpose_b, clear_accum
        self.policy = policy
        """How the block's warps split the C tile: ``WARP_POLICY_*`` (``T.GemmWarpPolicy``)."""
        self.impl = impl
        """Which implementation lowers it: ``None`` for tile's own, else one the target lists
        in ``Capabilities.gemm_impls`` (``"cute"`` on CUDA). Part of the IR, so of the cache key."""

    @property
    def mnk(self) -> tuple[ir.Expr, ir.Expr, ir.Expr]:
        a0, a1 = _two(self.a)
        b0, b1 = _two(self.b)
        m, k = (a1, a0) if self.transpose_a else (a0, a1)
        n = b0 if self.transpose_b else b1
        return m, n, k

    @classmethod
    def build(
        cls,
        a: object,
        b: object,
        c: object,
        transpose_a: bool,
        transpose_b: bool,
        clear_accum: bool,
        policy: int = WARP_POLICY_SQUARE,
        impl: object = None,
    ) -> Gemm:
        """Make a gemm from user operands, checking that M, N and K agree."""
        op = cls(
            _matrix(a, "A"),
            _matrix(b, "B"),
            _matrix(c, "C"),
            bool(transpose_a),
            bool(transpose_b),
            bool(clear_accum),
            int(policy),
            _impl_name(impl),
        )
        if op.a.dtype != op.b.dtype:
            raise TileTypeError(
                f"T.gemm operands have different element types: A {op.a.name} is {op.a.dtype}, "
                f"B {op.b.name} is {op.b.dtype}",
                hint="T.copy one operand into a tile of the other's dtype first (T.copy casts)",
            )
        if op.c.scope.startswith("shared"):
            raise TileTypeError(
                f"T.gemm accumulator C {op.c.name} is in {op.c.scope} memory; it must be a fragment",
                hint="allocate it with T.alloc_fragment((M, N), accum_dtype) "
                "and T.copy it out after the loop",
            )
        m, n, k = op.mnk
        b0, b1 = _two(op.b)
        kb = b1 if op.transpose_b else b0
        c0, c1 = _two(op.c)
        checks = [
            ("K of A", k, "K of B", kb),
            ("M of A", m, "rows of C", c0),
            ("N of B", n, "columns of C", c1),
        ]
        for left_name, left, right_name, right in checks:
            if extents_match([left], [right]) is False and not (as_int(left) == 1 == as_int(right)):
                raise TileShapeError(
                    f"T.gemm shapes disagree: {left_name} is {left} but {right_name} is {right} "
                    f"(A {op.a.name}{list(_two(op.a))}, B {op.b.name}{list(_two(op.b))}, "
                    f"C {op.c.name}{list(_two(op.c))}, "
                    f"transpose_A={op.transpose_a}, transpose_B={op.transpose_b})",
                    hint="A is (M, K) [(K, M) with transpose_A], "
                    "B is (K, N) [(N, K) with transpose_B], C is (M, N)",
                )
        return op

    @classmethod
    def decode(cls, call: ir.Call) -> Gemm:
        a, b, c = (Region.from_expr(x) for x in call.args[:3])
        flags = [bool(as_int(x)) for x in call.args[3:6]]
        policy = as_int(call.args[6]) if len(call.args) > 6 else None
        impl = str(call.args[7].value) if len(call.args) > 7 else None
        return cls(
            a, b, c, flags[0], flags[1], flags[2], WARP_POLICY_SQUARE if policy is None else policy, impl
        )

    layout_level = LAYOUT_STRICT

    def infer_layout(self, ctx: LowerContext) -> Mapping[str, Any]:
        """Level 1: the hardware fragments for the target's mma shape, swizzled shared operands.

        The accumulator takes the block fragment of ``Capabilities.mma_shapes[0]``
        over the block's warps (split by the warp policy; Square: as square as the
        tile allows); fragment A/B
        operands take the matching operand fragments (replicated across the other
        warp dimension); shared operands take the widest swizzle, unless the program
        swizzled them already (``T.annotate_layout``: a 32- or 64-byte swizzle stays). Targets without
        matrix instructions (the CPU) constrain nothing.
        """
        m, n, k = (as_int(e) for e in self.mnk)
        threads = ctx.threads or 1
        if m is None or n is None or k is None or mma_tile(ctx.capabilities) is None:
            return {}
        policy = int(getattr(self, "policy", 0))
        made = gemm_fragments(m, n, threads, ctx.capabilities, self.a.dtype, k, policy, self.c.dtype)
        if made is None:
            return {}
        c_frag, a_frag, b_frag = made
        out: dict[str, Any] = {}
        if is_fragment_buffer(self.c.buffer) and region_is_whole(self.c):
            out[self.c.name] = c_frag
        operands = [(self.a, a_frag, self.transpose_a), (self.b, b_frag, self.transpose_b)]
        for region, frag, transposed in operands:
            if is_shared_buffer(region.buffer):
                if isinstance(ctx.layouts.get(region.name), SwizzledLayout):
                    continue  # the program's swizzle (T.annotate_layout): every width addresses
                layout = shared_operand_layout(region.buffer)
                if layout is not None:
                    out[region.name] = layout
            elif is_fragment_buffer(region.buffer) and frag is not None and region_is_whole(region):
                rows, cols = (int(e) for e in frag.get_input_shape())
                out[region.name] = fragment_through(frag, [cols, rows], [1, 0]) if transposed else frag
        return out

    def encode(self) -> ir.Call:
        flags = [
            tirx.const(int(f), "int32")
            for f in (self.transpose_a, self.transpose_b, self.clear_accum, self.policy)
        ]
        # the impl only when not the default: default gemms keep their IR text (and cache keys)
        impl = [ir.StringImm(self.impl)] if self.impl is not None else []
        return tirx.call_intrin(
            "handle", self.op_name, self.a.to_expr(), self.b.to_expr(), self.c.to_expr(), *flags, *impl
        )

    def lower(self, ctx: LowerContext) -> Any:
        """The target's rule; an ``impl`` the target does not list is refused here, for every backend."""
        if self.impl is not None and self.impl not in ctx.capabilities.gemm_impls:
            have = ", ".join(repr(name) for name in (DEFAULT_IMPL, *ctx.capabilities.gemm_impls))
            raise ctx.error(
                UnsupportedOnTargetError,
                f"T.gemm impl={self.impl!r} is not available for target {ctx.target}; it has {have}",
                hint='drop impl= (or pass impl="tile") to use tile\'s own lowering',
            )
        return super().lower(ctx)


def _at(region: Region, row: ir.Expr, col: ir.Expr) -> list[ir.Expr]:
    """Indices of element (row, col) of a 2-D view of ``region``."""
    pair = iter([row, col])
    if len(region.extents) == 2:
        return [lo + next(pair) for lo in region.mins]
    return [
        lo if as_int(e) == 1 else lo + next(pair) for lo, e in zip(region.mins, region.extents, strict=True)
    ]


def lower_gemm_loops(op: TileOp, ctx: LowerContext) -> Any:
    """Loop-nest rule (i, k, j with the ``j`` loop parallel): correct on any target, fast on none.

    Not registered generically: a GPU backend must bind threads to it. The CPU backend
    registers it, since its parallel loops become vector loops.
    """
    assert isinstance(op, Gemm)
    m, n, k = op.mnk
    i, j, kk = fresh_vars("i", 1)[0], fresh_vars("j", 1)[0], fresh_vars("k", 1)[0]
    bind_ranges(ctx.analyzer, [i, j, kk], [m, n, k])
    acc = op.c.dtype
    a_val = tirx.BufferLoad(op.a.buffer, _at(op.a, kk, i) if op.transpose_a else _at(op.a, i, kk))
    b_val = tirx.BufferLoad(op.b.buffer, _at(op.b, j, kk) if op.transpose_b else _at(op.b, kk, j))
    c_idx = _at(op.c, i, j)
    update = tirx.BufferStore(
        op.c.buffer, tirx.BufferLoad(op.c.buffer, c_idx) + cast_to(acc, a_val) * cast_to(acc, b_val), c_idx
    )
    body = tirx.For(kk, 0, k, tirx.ForKind.SERIAL, parallel_nest([j], [n], update))
    stmts = []
    if op.clear_accum:
        i2, j2 = fresh_vars("c", 2)
        zero = tirx.BufferStore(op.c.buffer, tirx.const(0, acc), _at(op.c, i2, j2))
        stmts.append(parallel_nest([i2, j2], [m, n], zero))
    stmts.append(tirx.For(i, 0, m, tirx.ForKind.SERIAL, body))
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)
