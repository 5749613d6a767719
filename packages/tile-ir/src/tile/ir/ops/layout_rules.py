"""Layout building blocks shared by the ops' ``infer_layout`` rules and the inference pass.

Everything here is built from ``tile.layout`` (fragments, hardware tables, swizzles);
nothing re-derives the algebra. Also: encoding a Layout/Fragment as TVM attribute
data (so it can live on a ``PrimFunc`` or a loop) and decoding it back.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

from tile.layout import Fragment, Layout, SwizzledLayout, make_linear_fragment, make_swizzled_layout
from tile.layout.hardware import (
    make_mfma_block_fragment,
    make_mma_block_fragment,
    mfma_operand,
    mma_fragment,
    wgmma_a,
    wgmma_m64nnk16_d,
)

from ..backend import Capabilities, MmaInstruction
from .region import as_int

LAYOUT_STRICT = 1
"""Level 1: operators that only work with one layout (``T.gemm``) and user annotations."""
LAYOUT_COMMON = 2
"""Level 2: copies and reductions, which follow a layout known from level 1."""
LAYOUT_FREE = 3
"""Level 3: parallel loops and anything still unconstrained (defaults are chosen here)."""


def int_shape(shape: Sequence[Any]) -> list[int] | None:
    """The shape as Python ints, or ``None`` when a dim is symbolic."""
    out = [as_int(e) for e in shape]
    return None if any(d is None for d in out) else [int(d) for d in out if d is not None]


def _subst(expr: Any, table: Mapping[Any, Any]) -> Any:
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: table.get(v, v)))


# --------------------------------------------------------------------------- fragments
def linear_fragment(shape: Sequence[int], threads: int) -> Fragment:
    """The default binding of an element grid to ``threads`` threads (tail locals may be partial).

    Row-major element ``e`` -> thread ``e % T``, local ``e // T`` when ``T`` divides the
    element count or the grid fits in one pass of the threads. Otherwise a grid of two
    or more dims is split into rows (all dims but the last) and columns: ``T = r * c``,
    thread ``(row % r) * c + col % c``, local ``(row // r) * ceil(N / c) + col // c``. The
    flat rule there (a 16 x 333 tile over 128 threads) would put a row on threads
    ``(row * 333 + col) % 128``, which no reduction over the row can follow (its
    owners are not an affine function of the column); here a row's owners are ``c``
    consecutive threads. ``c`` (a divisor of ``T``) gives the fewest locals per
    thread, the widest row segment on a tie. The same holds when ``T`` divides the count
    but neither ``T`` nor the row length ``N`` divides the other (16 x 24 over 128
    threads: flat, row ``i`` sits on ``(24 i + col) % 128``), so those grids split too, and
    so do grids smaller than one pass whose row length does not divide ``T`` (16 x 3 over
    128 threads: flat, row ``i`` would sit on threads ``3 i .. 3 i + 2``, a group no
    reduction's xor butterfly joins; split, each row sits on one thread).
    """
    total = math.prod(shape)
    row = shape[-1] if shape else 1
    rows_follow_flat = len(shape) < 2 or row % threads == 0 or threads % row == 0
    if total % threads == 0 and rows_follow_flat:
        return make_linear_fragment(list(shape), threads)
    if len(shape) >= 2 and (total > threads or not rows_follow_flat):
        return _row_split_fragment(shape, threads)
    used = min(threads, total)

    def fn(*v: Any) -> tuple[Any, Any]:
        e: Any = tirx.const(0, "int32")
        for var, extent in zip(v, shape, strict=True):
            e = e * extent + var
        return tirx.floormod(e, used), tirx.floordiv(e, used)

    return Fragment(list(shape), forward_fn=fn)


def _row_split_fragment(shape: Sequence[int], threads: int) -> Fragment:
    rows, cols = math.prod(shape[:-1]), shape[-1]
    best: tuple[int, int] | None = None
    exact: tuple[int, int] | None = None
    for c in range(1, threads + 1):
        if threads % c:
            continue
        locals_ = -(-rows // (threads // c)) * -(-cols // c)
        if best is None or locals_ <= best[0]:
            best = (locals_, c)
        # no holes: c threads split a row evenly and the rows fill whole thread groups
        # (or one pass of them), so the binding is invertible and a row reduction's
        # owners are a whole group of c threads
        hole_free = cols % c == 0 and (rows % (threads // c) == 0 or rows <= threads // c)
        if hole_free and (exact is None or locals_ <= exact[0]):
            exact = (locals_, c)
    assert best is not None
    # an exact split wins unless it costs more than 4x the fewest locals (a 16 x 333 tile
    # on 128 threads would put 333 locals on each of 16 threads)
    c = exact[1] if exact is not None and exact[0] <= 4 * best[0] else best[1]
    r, per_row = threads // c, -(-cols // c)

    def fn(*v: Any) -> tuple[Any, Any]:
        row: Any = tirx.const(0, "int32")
        for var, extent in zip(v[:-1], shape[:-1], strict=True):
            row = row * extent + var
        col = v[-1]
        thread = tirx.floormod(row, r) * c + tirx.floormod(col, c)
        return thread, tirx.floordiv(row, r) * per_row + tirx.floordiv(col, c)

    return Fragment(list(shape), forward_fn=fn)


def fragment_through(frag: Fragment, extents: Sequence[int], dims: Sequence[int]) -> Fragment:
    """The fragment over a loop nest of ``extents`` whose point ``v`` touches ``frag[v[dims[0]], ...]``.

    ``dims`` is a permutation of the loop dims: every iteration runs on the thread
    (threads, with replication) holding the element it touches.
    """
    rep_count = frag.replicate_size

    def thread(*args: Any) -> Any:
        v = args[: len(extents)]
        rep = args[len(extents)] if rep_count > 1 else 0
        return frag.map_forward_thread([v[d] for d in dims], rep)

    def index(*v: Any) -> Any:
        return frag.map_forward_index([v[d] for d in dims])

    return Fragment(list(extents), forward_thread_fn=thread, forward_index_fn=index, replicate=rep_count)


def project_fragment(
    frag: Fragment, extents: Sequence[int], kept: Sequence[int], divs: Sequence[int] | None = None
) -> Fragment:
    """A buffer indexed by loop dims ``kept`` of a nest bound by ``frag`` (paper Fig. 7).

    The buffer's element ``x`` must live on every thread that runs an iteration
    touching it, so it is replicated over the dropped dims (and ``frag``'s own
    replication); the replication is then condensed to the distinct owners. The local
    index is ``frag``'s with the dropped dims at 0, which is unique per thread, renumbered
    without gaps (``compact_index``) so that ``(x, rep) -> (thread, local)`` is onto the
    threads' registers and a loop over it can be thread-bound. ``divs[k]`` (default 1)
    says buffer index ``k`` is ``v // divs[k]`` of its loop var ``v`` (a packed operand
    read as ``B[i, j // 2]``): the element is replicated over the ``divs[k]`` values of
    ``v`` that read it too.
    """
    steps = list(divs) if divs is not None else [1] * len(kept)
    dropped = [d for d in range(len(extents)) if d not in kept]
    spread = [extents[d] for d in dropped] + [c for c in steps if c > 1]
    drop_total = math.prod(spread)
    replicate = drop_total * frag.replicate_size

    def point(kept_vars: Sequence[Any], rep: Any) -> list[Any]:
        digits: list[Any] = []
        stride = 1
        for extent in reversed(spread):
            digits.insert(0, tirx.floormod(tirx.floordiv(rep, stride), extent))
            stride *= extent
        coords: list[Any] = [tirx.const(0, "int32")] * len(extents)
        for d, digit in zip(dropped, digits, strict=False):
            coords[d] = digit
        rest = iter(digits[len(dropped) :])
        for var, d, step in zip(kept_vars, kept, steps, strict=True):
            coords[d] = var * step + next(rest) if step > 1 else var
        return coords

    def thread(*args: Any) -> Any:
        kept_vars, rep = args[: len(kept)], (args[len(kept)] if replicate > 1 else tirx.const(0, "int32"))
        inner = tirx.floordiv(rep, drop_total) if frag.replicate_size > 1 else 0
        return frag.map_forward_thread(point(kept_vars, tirx.floormod(rep, drop_total)), inner)

    def index(*kept_vars: Any) -> Any:
        return frag.map_forward_index(point(kept_vars, tirx.const(0, "int32")))

    shape = [extents[d] // step for d, step in zip(kept, steps, strict=True)]
    if as_int(frag.get_thread_size()) == 1:
        return linear_fragment(shape, 1)
    out = Fragment(shape, forward_thread_fn=thread, forward_index_fn=index, replicate=replicate)
    return out.condense_rep_var().compact_index()


def same_fragment(a: Layout, b: Layout) -> bool:
    """Whether two layouts agree: same map for layouts, same owners for fragments.

    Fragments are compared by which threads hold each element; the local numbering
    is a storage choice of whichever fragment came first, so it may differ.
    """
    if not isinstance(a, Fragment) or not isinstance(b, Fragment):
        return bool(a.is_fragment == b.is_fragment and a.is_equal(b))
    if a.is_equal(b):
        return True
    shape_a, shape_b = a.const_input_shape(), b.const_input_shape()
    if shape_a is None or shape_a != shape_b:
        return False
    if as_int(a.get_thread_size()) == 1 == as_int(b.get_thread_size()):
        return True
    return _owners(a) == _owners(b)


def _owners(frag: Fragment) -> set[tuple[tuple[int, ...], int]]:
    return {(coord, thread) for coord, _rep, thread, _local in frag.enumerate_threads()}


# --------------------------------------------------------------------------- gemm
def warp_partition(m: int, n: int, warps: int, tile_m: int, tile_n: int, policy: int = 0) -> tuple[int, int]:
    """Split ``warps`` into ``warps_m x warps_n`` that tile ``m x n``; ``(0, 0)`` if none does.

    ``policy`` is ``T.GemmWarpPolicy``: 0 Square (among the splits where every warp
    gets whole ``tile_m x tile_n`` instruction tiles, the one whose per-warp tile is
    closest to square), 1 FullRow (warps split the rows), 2 FullCol (the columns).
    """
    best: tuple[float, int, int] | None = None
    for wm in range(1, warps + 1):
        if warps % wm or (policy == 1 and wm != warps) or (policy == 2 and wm != 1):
            continue
        wn = warps // wm
        if m % (tile_m * wm) or n % (tile_n * wn):
            continue
        score = abs(math.log((m / wm) / (n / wn)))
        if best is None or score < best[0]:
            best = (score, wm, wn)
    if best is None:
        return 0, 0
    return best[1], best[2]


def mma_tile(caps: Capabilities) -> tuple[int, int, int] | None:
    """The (m, n, k) instruction shape a gemm's fragments are built for, or ``None`` (no mma)."""
    if not caps.thread_binding or caps.warp_size <= 1 or not caps.mma_shapes:
        return None
    return caps.mma_shapes[0]


WARPGROUP_THREADS = 128


def warpgroup_partition(m: int, n: int, groups: int, policy: int = 0) -> tuple[int, int]:
    """``warp_partition`` for warpgroups (m64 x n8 tiles); a tie goes to splitting M.

    Splitting M keeps each row of the accumulator in one warpgroup (so a row-wise
    softmax and a register-A gemm on it stay inside it) and N per instruction large.
    """
    if policy != 0:
        return warp_partition(m, n, groups, 64, 8, policy)
    best: tuple[float, int, int] | None = None
    for wm in range(1, groups + 1):
        wn = groups // wm
        if groups % wm or m % (64 * wm) or n % (8 * wn):
            continue
        key = (round(abs(math.log((m / wm) / (n / wn))), 9), -wm, wn)
        if best is None or key < best:
            best = key
    return (0, 0) if best is None else (-best[1], best[2])


def warpgroup_fragment(m: int, n: int, threads: int, max_n: int, policy: int = 0) -> Fragment | None:
    """C of an ``m x n`` gemm on warpgroup MMA (``m64nNk16``), or ``None`` if it does not split.

    Warpgroups split the tile by ``policy`` (as warps do for mma.sync); each computes
    its ``m/wg_m x n/wg_n`` part as ``m/wg_m/64`` stacked ``m64nN`` instructions with
    ``N = n/wg_n <= max_n``, registers of the upper instruction first.
    """
    groups = threads // WARPGROUP_THREADS
    if groups < 1 or threads % WARPGROUP_THREADS:
        return None
    wg_m, wg_n = warpgroup_partition(m, n, groups, policy)
    if wg_m == 0 or n // wg_n > max_n:
        return None
    inst = wgmma_m64nnk16_d(n // wg_n).repeat([m // wg_m // 64, 1], lower_dim_first=False)
    return inst.repeat([wg_m, wg_n], repeat_on_thread=True, lower_dim_first=False)


def warpgroup_a_fragment(
    m: int, n: int, k: int, threads: int, a_dtype: str, policy: int = 0
) -> Fragment | None:
    """A (``m x k``) of a warpgroup gemm read from registers, or ``None`` if it has no such form.

    Warpgroup ``g`` of the ``wg_m x wg_n`` split holds the rows of its accumulator part
    as register-A tiles of the dtype's wgmma (``m64k16``, 8 values each; tf32 ``m64k8``,
    4 values each; rows first, then k steps); the
    ``wg_n`` warpgroups of one row band hold the same rows (replication).
    """
    groups = threads // WARPGROUP_THREADS
    wg_m, wg_n = warpgroup_partition(m, n, groups, policy)
    if wg_m == 0 or (m // wg_m) % 64:
        return None
    try:
        base = wgmma_a(a_dtype)
    except Exception:
        return None
    step = int(base.get_input_shape()[1])  # K of one instruction: 16 (16-bit), 8 (tf32)
    if k % step:
        return None
    part_m = m // wg_m
    group = base.repeat([part_m // 64, k // step], lower_dim_first=False)

    def thread(i: Any, kk: Any, rep: Any = 0) -> Any:
        lane = group.map_forward_thread([tirx.floormod(i, part_m), kk])
        return lane + (tirx.floordiv(i, part_m) * wg_n + rep) * WARPGROUP_THREADS

    return Fragment(
        [m, k],
        forward_thread_fn=thread,
        forward_index_fn=lambda i, kk: group.map_forward_index([tirx.floormod(i, part_m), kk]),
        replicate=wg_n,
    )


@dataclasses.dataclass(frozen=True)
class MfmaTiling:
    """How a wave64 gemm runs on MFMAs: the instruction and the waves' split of ``M x N``."""

    instruction: MmaInstruction
    waves_m: int
    waves_n: int

    @property
    def tile(self) -> int:
        """M = N of the instruction (16 or 32)."""
        return self.instruction.m


def mfma_tiling(
    m: int, n: int, k: int, threads: int, caps: Capabilities, a_dtype: str, policy: int = 0
) -> MfmaTiling | None:
    """The MFMA an ``m x n x k`` gemm on ``threads`` threads uses, or ``None`` when none fits.

    The one decision both the accumulator layout (``gemm_fragments``) and a backend's
    MFMA lowering read, so the two cannot disagree. Among ``caps.mma_instructions``
    taking ``a_dtype`` operands: a 32x32 one when the waves split ``m x n`` into whole
    32x32 tiles (by ``policy``, as ``warp_partition``) and its K divides ``k`` (half the
    operand traffic per multiply of a 16x16 one, and the same accumulator registers);
    otherwise a 16x16 one on the same terms.
    """
    waves = threads // caps.warp_size if caps.warp_size == 64 else 0
    if waves < 1 or threads % caps.warp_size:
        return None
    for tile in (32, 16):
        for instr in caps.mma_instructions:
            if instr.input_dtype != a_dtype or instr.m != tile or instr.n != tile or k % instr.k:
                continue
            wm, wn = warp_partition(m, n, waves, tile, tile, policy)
            if wm:
                return MfmaTiling(instr, wm, wn)
    return None


def _mfma_fragments(
    m: int, n: int, k: int, threads: int, caps: Capabilities, a_dtype: str, policy: int
) -> tuple[Fragment, Fragment | None, Fragment | None] | None:
    """``gemm_fragments`` on wave64 (AMD): the fragments of ``mfma_tiling``'s instruction.

    Without an MFMA for these operands the accumulator still takes the 16x16 D layout
    over the waves (a backend's per-thread fallback computes any layout), with no
    operand fragments.
    """
    tiling = mfma_tiling(m, n, k, threads, caps, a_dtype, policy)
    if tiling is None:
        wm, wn = warp_partition(m, n, threads // caps.warp_size, 16, 16, policy)
        return None if wm == 0 else (make_mfma_block_fragment(m, n, wm, wn), None, None)
    instr, wm, wn = tiling.instruction, tiling.waves_m, tiling.waves_n
    c = make_mfma_block_fragment(m, n, wm, wn, tile=tiling.tile)
    a_base, b_base = mfma_operand("A", instr.m, instr.k), mfma_operand("B", instr.n, instr.k)
    a, b = _replicated_operands(m, n, k, wm, wn, caps.warp_size, a_base, b_base)
    return c, a, b


def has_warpgroup_form(caps: Capabilities, a_dtype: str, c_dtype: str | None) -> bool:
    """Whether the target's warpgroup MMA (an m64 instruction) takes ``a_dtype`` operands into a
    ``c_dtype`` accumulator: from ``caps.mma_instructions`` where the backend lists them (every
    dtype otherwise, or where ``c_dtype`` is ``None``: only the operands are checked)."""
    if not caps.mma_instructions:
        return True
    return any(
        i.m == 64 and i.input_dtype == a_dtype and c_dtype in (None, i.accumulator_dtype)
        for i in caps.mma_instructions
    )


def gemm_fragments(
    m: int,
    n: int,
    threads: int,
    caps: Capabilities,
    a_dtype: str,
    k: int,
    policy: int = 0,
    c_dtype: str | None = None,
) -> tuple[Fragment, Fragment | None, Fragment | None] | None:
    """C, A and B fragments of an ``m x n`` gemm over ``threads`` threads (``None`` if no mma fits).

    C is the hardware accumulator fragment grown over the warps (over warpgroups when
    the target's first mma shape is a warpgroup's ``(64, max_n, 16)`` and it has a form for
    these dtypes, ``has_warpgroup_form``; else the warps' mma.sync shape; on wave64, the
    MFMA ``mfma_tiling`` picks); A (``m x k``) is the
    mma A operand per warp row, replicated over the warp columns; B (``k x n``) the B
    operand per warp column, replicated over the warp rows. A/B are ``None`` when
    the target has no fragment table for them.
    """
    shape = mma_tile(caps)
    if shape is None:
        return None
    tile_m, tile_n, _ = shape
    if caps.warp_size == 64:
        return _mfma_fragments(m, n, k, threads, caps, a_dtype, policy)
    if tile_m == 64 and caps.warp_size == 32:
        wgmma = has_warpgroup_form(caps, a_dtype, c_dtype)
        made = warpgroup_fragment(m, n, threads, tile_n, policy) if wgmma else None
        if made is not None:
            return made, warpgroup_a_fragment(m, n, k, threads, a_dtype, policy), None
        tile_m, tile_n = 16, 8  # no warpgroup split: the warps use the mma.sync shape
    warps = threads // caps.warp_size
    if warps < 1 or caps.warp_size != 32 or tile_n != 8:
        return None
    wm, wn = warp_partition(m, n, warps, tile_m, tile_n, policy)
    if wm == 0:
        return None
    c = make_mma_block_fragment(m, n, wm, wn)
    try:
        a_base, b_base = mma_fragment("A", a_dtype), mma_fragment("B", a_dtype)
    except Exception:
        return c, None, None
    a, b = _replicated_operands(m, n, k, wm, wn, caps.warp_size, a_base, b_base)
    return c, a, b


def _replicated_operands(
    m: int, n: int, k: int, wm: int, wn: int, lanes: int, a_base: Fragment, b_base: Fragment
) -> tuple[Fragment | None, Fragment | None]:
    """A per warp row (replicated over the ``wn`` warp columns) and B per warp column, or ``None``s."""
    a_rows, a_k = (int(e) for e in a_base.get_input_shape())
    b_k, b_cols = (int(e) for e in b_base.get_input_shape())
    if (m // wm) % a_rows or k % a_k or (n // wn) % b_cols or k % b_k:
        return None, None
    a_warp = a_base.repeat([m // wm // a_rows, k // a_k], lower_dim_first=False)
    b_warp = b_base.repeat([k // b_k, n // wn // b_cols], lower_dim_first=False)
    warp_m, warp_n = m // wm, n // wn

    def a_thread(i: Any, kk: Any, rep: Any = 0) -> Any:
        lane = a_warp.map_forward_thread([tirx.floormod(i, warp_m), kk])
        return lane + (tirx.floordiv(i, warp_m) * wn + rep) * lanes

    def b_thread(kk: Any, j: Any, rep: Any = 0) -> Any:
        lane = b_warp.map_forward_thread([kk, tirx.floormod(j, warp_n)])
        return lane + (rep * wn + tirx.floordiv(j, warp_n)) * lanes

    a = Fragment(
        [m, k],
        forward_thread_fn=a_thread,
        forward_index_fn=lambda i, kk: a_warp.map_forward_index([tirx.floormod(i, warp_m), kk]),
        replicate=wn,
    )
    b = Fragment(
        [k, n],
        forward_thread_fn=b_thread,
        forward_index_fn=lambda kk, j: b_warp.map_forward_index([kk, tirx.floormod(j, warp_n)]),
        replicate=wm,
    )
    return a, b


def shared_operand_layout(buffer: Any) -> Layout | None:
    """The swizzled layout of a shared gemm operand (``None`` for symbolic or 1-D shapes)."""
    shape = int_shape(list(buffer.shape))
    if shape is None or len(shape) < 2:
        return None
    return make_swizzled_layout(shape, str(buffer.dtype))


# --------------------------------------------------------------------------- encoding
def encode_layout(layout: Layout) -> dict[str, Any]:
    """A Layout/Fragment as TVM attribute data (a dict of exprs, vars and ints)."""
    out: dict[str, Any] = {
        "shape": list(layout.get_input_shape()),
        "vars": list(layout.get_forward_vars()),
        "index": list(layout.get_forward_index()),
    }
    if isinstance(layout, SwizzledLayout):
        out["swizzle"] = [layout.element_bits, layout.swizzle_bytes]
    if isinstance(layout, Fragment):
        out["thread"] = layout.thread
        out["rep"] = layout.rep_var
        out["replicate"] = layout.replicate_size
    return out


def decode_layout(data: Mapping[str, Any]) -> Layout:
    """Rebuild what ``encode_layout`` made."""
    shape = [int(e) if as_int(e) is not None else e for e in data["shape"]]
    old_vars = list(data["vars"])
    index = list(data["index"])
    if "swizzle" in data:
        bits, span = (int(x) for x in data["swizzle"])
        return SwizzledLayout(shape, bits, span)
    if "thread" not in data:
        return Layout(shape, lambda *v: [_subst(e, dict(zip(old_vars, v, strict=True))) for e in index])
    replicate = int(data["replicate"])
    rep_var = data["rep"]

    def thread(*args: Any) -> Any:
        table = dict(zip(old_vars, args[: len(old_vars)], strict=True))
        table[rep_var] = args[len(old_vars)] if replicate > 1 else tirx.const(0, "int32")
        return _subst(data["thread"], table)

    def local(*v: Any) -> Any:
        table = dict(zip(old_vars, v, strict=True))
        return [_subst(e, table) for e in index]

    return Fragment(shape, forward_thread_fn=thread, forward_index_fn=local, replicate=replicate)


def is_fragment_buffer(buffer: Any) -> bool:
    """Whether ``buffer`` is a block-level register tile (``T.alloc_fragment``)."""
    return str(buffer.scope()).startswith("local.fragment")


THREAD_PRIVATE_SCOPES = ("local", "local.var")
"""Scopes of the buffers each thread holds a whole copy of (``T.alloc_local``, ``T.alloc_var``);
fragments (``local.fragment``) are shared out over the block's threads instead."""


def is_thread_private(buffer: Any) -> bool:
    """Whether each thread holds all of ``buffer`` (``THREAD_PRIVATE_SCOPES``)."""
    return str(buffer.scope()) in THREAD_PRIVATE_SCOPES


def is_shared_buffer(buffer: Any) -> bool:
    return str(buffer.scope()).startswith("shared")


def region_is_whole(region: Any) -> bool:
    """Whether a region starts at 0 and spans its whole buffer (constant shapes)."""
    shape = int_shape(list(region.buffer.shape))
    ext = int_shape(list(region.extents))
    mins = [as_int(e) for e in region.mins]
    return shape is not None and shape == ext and all(x == 0 for x in mins)
