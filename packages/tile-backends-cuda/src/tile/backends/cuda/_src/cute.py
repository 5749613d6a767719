"""``T.gemm(..., impl="cute")``: the gemm written with CuTe, for comparison with tile's own.

The op becomes one call of ``tile_cute::gemm<...>`` (``include/tile_cuda/cute.h``): CuTe views
the shared A and B tiles with layouts equal to how tile stores them, each warp partitions its
sub-tile of C with a one-atom ``TiledMMA`` (m16n8k16), copies its operands to registers with
``cute::copy`` and runs ``cute::gemm``. The MMA atom is our own op with CuTe's SM80 traits that
calls ``tile_mma_m16n8k16_*`` (``tile_cuda/mma.h``), so no inline PTX and the CPU emulator runs it.

The accumulator stays the C fragment layout inference chose: CuTe sees the thread's registers
through a layout whose strides this module computes from the fragment (the local index of each
value of CuTe's ``((2,2), MMA_M, MMA_N)`` C partition), so epilogues that read C are unchanged.
The warps split C as tile's own lowering does (``layout_rules.warp_partition``).

Limits: A and B in shared memory covering their whole (last two dims of the) buffer, float16 or
bfloat16 into float32, an mma.sync accumulator layout (sm_80, sm_86, sm_89; on sm_90a a gemm whose
accumulator took the wgmma layout is refused). Operands go to registers with plain loads, not
ldmatrix, and the whole K of the tile is loaded before the MMAs: this is a reference point, not a
tuned kernel.

The headers come from the ``nvidia-cutlass`` wheel (``cutlass_library/source/include``), found
through importlib; nothing is vendored.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.errors import BackendUnavailableError, UnsupportedOnTargetError
from tile.ir.gpu.gemm import constant_mnk
from tile.ir.ops import Gemm, LowerContext
from tile.ir.ops.layout_rules import is_shared_buffer, warp_partition
from tile.ir.ops.region import Region, as_int
from tile.layout import Fragment, SwizzledLayout, dtype_bits

from .cute_headers import CALL_PREFIX, INSTALL_HINT, cutlass_include_dir
from .gemm import (
    WARP,
    _at,
    _call,
    _ptr,
    _seq,
    _slots,
    _span,
    clear_accumulator,
    fragment_accumulator,
)
from .hopper import shared_layouts_applied

IMPL = "cute"

_OPS = {"float16": "tile_cute::MmaF16F32", "bfloat16": "tile_cute::MmaBF16F32"}
"""Our MMA ops in cute.h, by operand dtype (float32 accumulators)."""


# --------------------------------------------------------------------------- layouts
def c_partition_coord(lane: int, v0: int, v1: int, mma_m: int, mma_n: int) -> tuple[int, int]:
    """(row, col) in the warp's C tile of value ``(v0, v1)`` of tile ``(mma_m, mma_n)`` of ``lane``.

    CuTe's ``SM80_16x8_Row`` (cute/atom/mma_traits_sm80.hpp): ``Layout<Shape<Shape<_4,_8>,
    Shape<_2,_2>>, Stride<Stride<_32,_1>, Stride<_16,_8>>>`` maps (thread, value) to a
    column-major index of the 16 x 8 tile; a one-atom TiledMMA repeats it every 16 rows
    (MMA_M) and 8 columns (MMA_N).
    """
    index = 32 * (lane % 4) + lane // 4 + 16 * v0 + 8 * v1
    return 16 * mma_m + index % 16, 8 * mma_n + index // 16


def swizzle_params(layout: Any, rows: int, cols: int, dtype: str) -> tuple[int, int]:
    """``(span, bits)``: CuTe's view of a ``rows x cols`` shared tile stored under ``layout``.

    A ``SwizzledLayout`` of ``swizzle_bytes`` stores rows of ``span`` elements with the 16-byte
    chunks XOR-permuted by ``Swizzle<bits, 3, 3>`` on the element offset (16-bit elements:
    ``M = 3`` is the 8-element chunk, ``S = 3`` moves byte-address bits [7, 7 + bits) onto
    [4, 4 + bits)); anything else is stored row-major (``span = cols``, no swizzle).
    """
    if isinstance(layout, SwizzledLayout) and [int(d) for d in layout.get_input_shape()] == [rows, cols]:
        span = layout.swizzle_bytes * 8 // dtype_bits(dtype)
        return span, int(math.log2(layout.swizzle_bytes // 16))
    return cols, 0


def _operand(region: Region, which: str, ctx: LowerContext, swizzled: bool) -> tuple[list[int], Any]:
    """Template numbers ``[rows, cols, span, bits]`` of a shared operand and a pointer to its tile."""
    buffer = region.buffer
    shape = [as_int(d) for d in buffer.shape]
    extents = [as_int(e) for e in region.extents]
    mins = [as_int(m) for m in region.mins]
    whole = (
        len(shape) >= 2
        and None not in shape[-2:]
        and extents[-2:] == shape[-2:]
        and mins[-2:] == [0, 0]
        and all(e == 1 for e in extents[:-2])
    )
    if not whole:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"T.gemm impl='cute': operand {which} ({region.name}) must be a whole shared tile "
            f"(the last two dims of {buffer.name} from 0), got a slice",
            hint="allocate the operand as its own T.alloc_shared tile, or use the default impl",
        )
    rows, cols = int(shape[-2]), int(shape[-1])  # type: ignore[arg-type]
    layout = ctx.layouts.get(region.name) if swizzled else None
    span, bits = swizzle_params(layout, rows, cols, str(region.dtype))
    pointer = _span(buffer, _at(region, 0, 0), rows * cols, "r")
    return [rows, cols, span, bits], pointer


def _c_slot(slots: Any, thread: tuple[int, int, int, int], v0: int, v1: int, mi: int, ni: int) -> int | None:
    """The register slot of value ``(v0, v1, mi, ni)`` of CuTe's C partition in the thread
    ``(tid, lane, row0, col0)`` (its warp's tile at ``row0, col0``), or None where it has none."""
    tid, lane, row0, col0 = thread
    r, c = c_partition_coord(lane, v0, v1, mi, ni)
    return slots.get((tid, (row0 + r, col0 + c)))


def accumulator_strides(
    c_frag: Fragment, m: int, n: int, warps_m: int, warps_n: int, threads: int
) -> tuple[int, int, int, int, int] | None:
    """``(base, v0, v1, mma_m, mma_n)``: where each value of CuTe's C partition sits in a thread's
    registers, the same affine map for every thread; ``None`` when it is not."""
    warp_m, warp_n = m // warps_m, n // warps_n
    mt, nt = warp_m // 16, warp_n // 8
    slots = _slots(c_frag)
    found: tuple[int, int, int, int, int] | None = None
    for tid in range(threads):
        warp, lane = divmod(tid, WARP)
        row0, col0 = (warp // warps_n) * warp_m, (warp % warps_n) * warp_n

        local = functools.partial(_c_slot, slots, (tid, lane, row0, col0))
        base = local(0, 0, 0, 0)
        steps = [local(1, 0, 0, 0), local(0, 1, 0, 0)]
        steps += [local(0, 0, 1, 0) if mt > 1 else base, local(0, 0, 0, 1) if nt > 1 else base]
        if base is None or None in steps:
            return None
        strides = tuple(s - base for s in steps)  # type: ignore[operator]
        here = (base, *strides)
        if found is None:
            found = here  # type: ignore[assignment]
        elif here != found:
            return None
        for v0 in range(2):
            for v1 in range(2):
                for mi in range(mt):
                    for ni in range(nt):
                        want = base + strides[0] * v0 + strides[1] * v1 + strides[2] * mi + strides[3] * ni
                        if local(v0, v1, mi, ni) != want:
                            return None
    return found


# --------------------------------------------------------------------------- lowering
def lower_gemm_cute(op: Gemm, ctx: LowerContext) -> Any:
    """``T.gemm(..., impl="cute")`` on CUDA (see module docstring)."""
    where = "T.gemm impl='cute'"
    default = "use the default impl (drop impl='cute')"
    op_name = _OPS.get(str(op.a.dtype))
    if op_name is None or str(op.c.dtype) != "float32":
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where} takes float16 or bfloat16 operands into a float32 accumulator, "
            f"got {op.a.dtype} into {op.c.dtype}",
            hint=default,
        )
    for which, region in (("A", op.a), ("B", op.b)):
        if not is_shared_buffer(region.buffer):
            raise ctx.error(
                UnsupportedOnTargetError,
                f"{where} reads A and B from shared memory; {which} ({region.name}) is in "
                f"{region.buffer.scope()} memory",
                hint=f"T.copy {region.name} into a T.alloc_shared tile first, or {default}",
            )
    m, n, k = constant_mnk(op, ctx, where)
    threads, tx, c_frag = fragment_accumulator(op, ctx, where)
    warps_m, warps_n = warp_partition(m, n, threads // WARP, 16, 8, op.policy)
    if warps_m == 0 or k % 16 or threads % WARP:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where}: a {m}x{n}x{k} tile does not split into m16n8k16 tiles over {threads // WARP} warps",
            hint=f"use M a multiple of 16 x warps_m, N of 8 x warps_n, K of 16, or {default}",
        )
    strides = accumulator_strides(c_frag, m, n, warps_m, warps_n, threads)
    if strides is None:
        raise ctx.error(
            UnsupportedOnTargetError,
            f"{where}: the accumulator {op.c.name} is not laid out as mma.sync tiles per warp "
            "(an annotated layout, or the wgmma layout on sm_90a)",
            hint=f"let T.gemm choose C's layout and target sm_80/sm_86/sm_89, or {default}",
        )
    include = cutlass_include_dir()
    if include is None:
        raise ctx.error(BackendUnavailableError, f"{where} needs the CUTLASS/CuTe headers", hint=INSTALL_HINT)
    # CuTe must view the shared tiles as they are stored: under their inferred swizzle where
    # apply_shared_layouts runs, else row-major
    swizzled = shared_layouts_applied(ctx.target)
    a_nums, a_ptr = _operand(op.a, "A", ctx, swizzled)
    b_nums, b_ptr = _operand(op.b, "B", ctx, swizzled)
    a_k, b_k = not op.transpose_a, op.transpose_b  # storage [MN][K]: A untransposed, B transposed
    _base, *acc = strides
    args = [
        op_name,
        warps_n,
        m // warps_m,
        n // warps_n,
        k,
        str(a_k).lower(),
        *a_nums,
        str(b_k).lower(),
        *b_nums,
        *acc,
    ]
    name = f"{CALL_PREFIX}{', '.join(str(a) for a in args)}>"
    # &C[the element CuTe's value (0, 0) of tile (0, 0) is, for this thread]: lower_fragments
    # turns it into this thread's register pointer
    warp, lane = tirx.floordiv(tx, WARP), tirx.floormod(tx, WARP)
    row = tirx.floordiv(warp, warps_n) * (m // warps_m) + tirx.floordiv(lane, 4)
    col = tirx.floormod(warp, warps_n) * (n // warps_n) + tirx.floormod(lane, 4) * 2
    stmts: list[Any] = []
    if op.clear_accum:
        stmts.append(clear_accumulator(op, c_frag, tx))
    stmts.append(_call(name, a_ptr, b_ptr, _ptr(op.c.buffer, _at(op.c, row, col)), tx))
    return _seq(stmts)


__all__ = [
    "IMPL",
    "accumulator_strides",
    "c_partition_coord",
    "lower_gemm_cute",
    "swizzle_params",
]
