"""TileLang's tile operators that tile expresses with its own: split-phase copies, explicit
wgmma GEMMs, transposes, buffer predicates and wide atomics.

* ``T.tma_copy(src, dst, barrier=bar)`` and ``T.async_copy(src, dst)`` are ``T.copy``s that
  have completed when the statement ends (TileLang leaves them in flight until the
  barrier or ``T.ptx_wait_group``); the waits a program writes after them then return
  at once. ``T.wgmma_gemm`` is ``T.gemm`` (wgmma on sm_90a where the operands allow).

Reducers (``T.alloc_reducer`` and its epochs) are in ``reducers.py``.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.ops import Atomic
from tile.ir.ops.region import as_int, region_of

from ..errors import (
    ArgumentIndexError,
    ArgumentTypeError,
    ArgumentValueError,
    TileTypeError,
)
from .builtins import Parallel, _alloc, _emit, _kernel, copy, gemm
from .compat_lang import dtype, script_dtype
from .naming import named
from .tile_ops_builtins import fetch_and


def tma_copy(src: Any, dst: Any, *, barrier: Any = None, **_options: Any) -> None:
    """Copy a tile (``T.tma_copy(A[i * 16], S, barrier=bar)``); the copy has landed when the
    statement ends, so the program's own arrive/wait on ``barrier`` only orders threads."""
    copy(src, dst)


def async_copy(src: Any, dst: Any, **_options: Any) -> None:
    """Copy a tile global -> shared; it has completed when the statement ends, so a later
    ``T.ptx_wait_group`` has nothing left to wait for."""
    copy(src, dst)


def wgmma_gemm(*args: Any, annotations: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """``T.gemm`` (TileLang's explicitly asynchronous Hopper spelling, the same operands and
    flags up to ``clear_accum``): tile lowers it to wgmma on sm_90a where the operands allow,
    otherwise to mma or the CPU's kernels, and waits for it, so a later ``T.wait_wgmma``
    returns at once."""
    gemm(*args[:7], annotations=annotations, **kwargs)


def transpose(src: Any, dst: Any, annotations: dict[str, Any] | None = None) -> None:
    """``dst[..., j, i] = src[..., i, j]`` for tiles whose last two extents are swapped."""
    src_region, src_buf, _ = region_of(src, "T.transpose source")
    dst_region, dst_buf, _ = region_of(dst, "T.transpose destination")
    if src_region is None or dst_region is None or len(src_region.extents) < 2:
        raise TileTypeError(
            "T.transpose takes two tiles of at least two dimensions",
            hint="write T.transpose(A_shared, B_shared) with shapes (M, N) and (N, M)",
        )
    src_ext = [int(e) for e in src_region.extents]
    dst_ext = [int(e) for e in dst_region.extents]
    if src_ext[:-2] + src_ext[-2:][::-1] != dst_ext:
        raise TileTypeError(
            f"T.transpose: {src_buf.name}{src_ext} does not transpose into {dst_buf.name}{dst_ext}",
            hint="the destination's last two extents are the source's, swapped",
        )
    with Parallel(*src_ext) as idx:
        idx = list(idx)  # at least two loop variables
        out = idx[:-2] + idx[-2:][::-1]
        value = tirx.BufferLoad(src_buf, [m + i for m, i in zip(src_region.mins, idx, strict=True)])
        B.buffer_store(dst_buf, value, [m + i for m, i in zip(dst_region.mins, out, strict=True)])


def _predicate_over(buffer: Any, name: str, start: bool) -> Any:
    region, buf, corner = region_of(buffer, f"T.{name}'s operand")
    mins = list(region.mins) if region is not None else list(corner)
    extents = list(region.extents) if region is not None else [1] * len(corner)
    flag = _alloc(f"T.{name}", [1], "bool", "local")
    B.buffer_store(flag, tirx.const(start, "bool"), [0])
    loops = [B.serial(0, e) for e in extents]
    idx = [loop.__enter__() for loop in loops]
    element = tirx.BufferLoad(buf, [m + i for m, i in zip(mins, idx, strict=True)])
    nonzero = element if str(buf.dtype) == "bool" else tirx.NE(element, tirx.const(0, str(buf.dtype)))
    combined = tirx.And(flag[0], nonzero) if start else tirx.Or(flag[0], nonzero)
    B.buffer_store(flag, combined, [0])
    for loop in reversed(loops):
        loop.__exit__(None, None, None)
    return flag[0]


def all_of(buffer: Any) -> Any:
    """Whether every element of ``buffer`` (or a slice of it) is non-zero."""
    return _predicate_over(buffer, "all_of", True)


def any_of(buffer: Any) -> Any:
    """Whether any element of ``buffer`` (or a slice of it) is non-zero."""
    return _predicate_over(buffer, "any_of", False)


def _lane_start(index: Any, lanes: int, name: str) -> Any:
    """The first of ``lanes`` consecutive indices: ``index`` itself, or the base of the ramp
    ``T.Ramp(base, 1, lanes)`` that names them all."""
    if not isinstance(index, tirx.Ramp):
        return index
    if as_int(index.stride) != 1 or as_int(index.lanes) != lanes:
        raise ArgumentValueError(
            f"{name} takes {lanes} consecutive elements, got the index {index}",
            hint=f"index with T.Ramp(i, 1, {lanes}), a slice [i:i + {lanes}] or the start [i]",
        )
    return index.base


def _wide_atomic_add(lanes: int) -> Any:
    def atomic_add_lanes(dst: Any, value: Any, return_prev: bool = False, **_options: Any) -> Any:
        name = f"T.atomic_addx{lanes}"
        _kernel(name)
        dst_region, dst_buf, dst_corner = region_of(dst, f"{name} destination")
        val_region, val_buf, val_corner = region_of(value, f"{name} value")
        d_mins = list(dst_region.mins if dst_region is not None else dst_corner)
        v_mins = list(val_region.mins if val_region is not None else val_corner)
        d_mins[-1] = _lane_start(d_mins[-1], lanes, name)
        v_mins[-1] = _lane_start(v_mins[-1], lanes, name)
        targets, sources = [], []
        for lane in range(lanes):  # `lanes` consecutive elements along the last dimension
            targets.append(tirx.BufferLoad(dst_buf, [*d_mins[:-1], d_mins[-1] + lane]))
            sources.append(tirx.BufferLoad(val_buf, [*v_mins[:-1], v_mins[-1] + lane]))
        if return_prev:
            # each element's own fetch-and-add, its old value one lane of the result
            olds = [fetch_and("add", t, s, name) for t, s in zip(targets, sources, strict=True)]
            return _script.Shuffle(olds, list(range(lanes)))
        for target, source in zip(targets, sources, strict=True):
            _emit(Atomic.build("add", target, source))
        return None

    return named(
        atomic_add_lanes,
        f"atomic_addx{lanes}",
        (
            f"Atomically add {lanes} consecutive elements of ``value`` (``X[i, j]``, a slice or\n"
            f"``X[T.Ramp(j, 1, {lanes})]``) to ``dst``'s {lanes} elements from its start on, each\n"
            f"element atomically. With ``return_prev=True`` the result is the {lanes} elements before\n"
            f"the update, a {lanes}-lane vector (``Prev[0:{lanes}] = T.atomic_addx{lanes}(..., "
            "return_prev=True)``."
        ),
    )


atomic_addx2 = _wide_atomic_add(2)
atomic_addx4 = _wide_atomic_add(4)


# ---------------------------------------------------------------- dtypes and lanes
tfloat32 = dtype("float32")
"""``T.tfloat32``: float32 storage. ``T.gemm`` multiplies float32 operands as tf32 on NVIDIA
tensor cores (mma.sync; sm_90a's wgmma), which read the top 19 bits of each float
(``Capabilities.float32_gemm``), and in full float32 on the CPU and AMD backends."""

TFLOAT32_VECTORS = {f"tfloat32x{n}": script_dtype(f"float32x{n}") for n in (2, 4, 8, 16, 32, 64)}
"""``T.tfloat32x2`` ... ``T.tfloat32x64``: vectors of ``T.tfloat32``, held as float32 vectors."""


def extract_lane(vector: Any, lane: Any) -> Any:
    """Lane ``lane`` (a constant) of a vector value, e.g. of ``T.ldg128(...)``'s ``uint32x4``.

    Raises ``ArgumentTypeError`` (a ``TypeError``) for a non-expression or a lane that is not
    a compile-time integer, ``ArgumentValueError`` (a ``ValueError``) for a scalar, and
    ``ArgumentIndexError`` (an ``IndexError``) for a lane outside the vector."""
    if not isinstance(vector, ir.Expr):
        raise ArgumentTypeError(
            f"T.extract_lane expects a PrimExpr (a vector expression), got {type(vector).__name__}",
            hint="T.extract_lane(v, 0) with v a vector value such as T.float16x2(a, b)",
        )
    lanes = int(tvm_ffi.dtype(str(vector.ty)).lanes)
    if lanes == 1:
        raise ArgumentValueError(
            f"T.extract_lane expects a vector expression, got a scalar {vector.ty} value",
            hint="a scalar is its own lane 0: use the value itself",
        )
    if isinstance(lane, tirx.IntImm):
        lane = int(lane.value)
    if isinstance(lane, bool) or not isinstance(lane, int):
        raise ArgumentTypeError(
            f"T.extract_lane: the lane must be a compile-time integer, got {lane!r}",
            hint=f"pass a constant lane in [0, {lanes - 1}]",
        )
    if not 0 <= lane < lanes:
        raise ArgumentIndexError(
            f"T.extract_lane: lane {lane} is out of bounds for a {lanes}-lane {vector.ty} value",
            hint=f"pass a constant lane in [0, {lanes - 1}]",
        )
    return _script.Shuffle([vector], [lane])


def dp4a(a: Any, b: Any, c: Any = 0) -> Any:
    """``T.dp4a(A, B, C)`` (TileLang's form): ``C[c] += A[a + k] * B[b + k]`` summed over
    ``k < 4``, for int8 ``A``/``B`` and an int32 accumulator ``C``, each a buffer (from its
    first element) or one element ``X[i]`` (from there along the last dimension). Checks
    raise ``ArgumentValueError`` (a ``ValueError``). With ``int8x4`` vector values instead it
    is TVMScript's expression ``dot(a, b) + c``."""
    if isinstance(a, ir.Expr) and not isinstance(a, TensorLoad) and str(a.ty) == "int8x4":
        return _script.dp4a(a, b, c)
    starts = [_element_start(x, name) for x, name in ((a, "A"), (b, "B"), (c, "C"))]
    for (buffer, _), name, want in zip(starts, "ABC", ("int8", "int8", "int32"), strict=True):
        if str(buffer.dtype) != want:
            what = "an int32 accumulator" if name == "C" else "int8 inputs"
            raise ArgumentValueError(
                f"T.dp4a requires {what}, got {name}.dtype={buffer.dtype}",
                hint="T.dp4a(A_int8[i], B_int8[i], C_int32[0]): C += 4-element dot product of A and B",
            )
    (a_buf, a_at), (b_buf, b_at), (c_buf, c_at) = starts
    total: Any = tirx.BufferLoad(c_buf, c_at)
    for k in range(4):
        pa = tirx.BufferLoad(a_buf, [*a_at[:-1], a_at[-1] + k])
        pb = tirx.BufferLoad(b_buf, [*b_at[:-1], b_at[-1] + k])
        total = total + tirx.Cast("int32", pa) * tirx.Cast("int32", pb)
    B.buffer_store(c_buf, total, c_at)
    return None


def _element_start(x: Any, name: str) -> tuple[Any, list[Any]]:
    if isinstance(x, TensorLoad):
        return x.source, list(x.indices)
    if tirx.is_buffer_var(x):
        return x, [tirx.const(0, "int32") for _ in x.shape]
    raise ArgumentTypeError(
        f"T.dp4a: {name} must be a buffer or one of its elements, got {type(x).__name__}",
        hint="T.dp4a(A_local[k], B_local[k], acc[0])",
    )


