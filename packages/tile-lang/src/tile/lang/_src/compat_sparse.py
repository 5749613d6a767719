"""``T.gemm_sp``: a GEMM whose A operand is stored 2:4 structured-sparse with index metadata.

A dense A row is cut into groups of four elements along K, at most two of them non-zero
(``float32``: groups of two, at most one non-zero). The kernel receives the kept values,
``A_sparse[m, g * 2 + i]`` (the ``i``-th kept value of group ``g``), and the metadata ``E``:
four bits per group, the first kept element's position in bits 0-1 and the second's in
bits 2-3; an ``E`` element of ``b`` bits holds the groups ``b / 4`` after one another from
its low bits on, so ``E`` has ``K / (b / 4 * 4)`` columns (``E[m, c]`` describes groups
``c * b / 4`` ...). ``float32``'s one-of-two groups use the same four bits as if the
element were two 16-bit halves: ``0b0100`` keeps element 0 and ``0b1110`` element 1.

tile expands the operand into a dense tile in shared memory and runs ``T.gemm`` on it (the
products and the sums are the dense GEMM's; GPUs do not use the sparse tensor-core
instructions here).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import tirx  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.ops.region import region_of

from ..errors import TileTypeError
from .builtins import Parallel, _alloc, gemm
from .session import current_session

BITS_PER_GROUP = 4
"""Metadata bits that describe one group."""


def sparsity_of(dtype: str) -> tuple[int, int]:
    """``(kept, group)``: how many of each group of ``group`` elements along K are stored."""
    if dtype == "float32":
        return 1, 2
    if _bits(dtype) in (8, 16) and dtype != "bool":
        return 2, 4
    raise TileTypeError(
        f"T.gemm_sp: A of dtype {dtype} has no structured-sparse form",
        hint="use float16, bfloat16, int8/uint8, float8 (2:4) or float32 (1:2)",
    )


def _bits(dtype: str) -> int:
    import tvm  # type: ignore[import-untyped]

    return int(tvm.DataType(dtype).bits)


def metadata_factor(dtype: str, meta_dtype: str) -> int:
    """How many dense K elements one metadata element describes (TileLang's ``e_factor``)."""
    _, group = sparsity_of(dtype)
    return _bits(meta_dtype) // BITS_PER_GROUP * group


def _extents(value: Any, what: str) -> tuple[Any, list[Any], list[int]]:
    region, buffer, _ = region_of(value, what)
    if region is None:
        raise TileTypeError(
            f"{what} must be a whole tile or a slice, not a corner A[i, j]",
            hint="pass the shared tile: T.gemm_sp(A_shared, E_shared, B_shared, C_local)",
        )
    if len(region.extents) != 2:
        raise TileTypeError(f"{what} must have two dimensions", hint="pass an (M, K) tile")
    return buffer, list(region.mins), [int(e) for e in region.extents]


def gemm_sp(
    A_sparse: Any,
    E: Any,
    B_: Any,
    C: Any,
    transpose_A: bool = False,
    transpose_E: bool = False,
    transpose_B: bool = False,
    policy: Any = 0,
    clear_accum: bool = False,
    k_pack: int = 1,
    wg_wait: int = 0,
    annotations: dict[str, Any] | None = None,
) -> None:
    """``C += A @ B`` where A is given 2:4 sparse: its kept values ``A_sparse`` (M, K/2) and
    metadata ``E`` (M, K/e_factor) (``transpose_A``/``transpose_E``: stored K-major)."""
    a_buf, a_min, a_ext = _extents(A_sparse, "T.gemm_sp's A_sparse")
    e_buf, e_min, e_ext = _extents(E, "T.gemm_sp's metadata E")
    dtype, meta_dtype = str(a_buf.dtype), str(e_buf.dtype)
    kept, group = sparsity_of(dtype)
    if not meta_dtype.startswith(("int", "uint")) or _bits(meta_dtype) < 8:
        raise TileTypeError(
            f"T.gemm_sp: metadata E has dtype {meta_dtype}",
            hint="store the metadata as int8, int16 or int32 (uint also works)",
        )
    M, K_stored = (a_ext[1], a_ext[0]) if transpose_A else (a_ext[0], a_ext[1])
    K = K_stored * group // kept
    factor = metadata_factor(dtype, meta_dtype)
    want_e = [K // factor, M] if transpose_E else [M, K // factor]
    if K % factor or e_ext != want_e:
        raise TileTypeError(
            f"T.gemm_sp: A_sparse {a_ext} stands for a {M}x{K} A, whose {meta_dtype} metadata is "
            f"{want_e}; E is {e_ext}",
            hint=f"each {meta_dtype} of E describes {factor} elements of a row of A: E is (M, K // {factor})",
        )
    dense = _alloc("T.gemm_sp", [K, M] if transpose_A else [M, K], dtype, "shared.dyn")
    _KernelScope.of_kernel().buffers.append(dense)
    groups_per_meta = _bits(meta_dtype) // BITS_PER_GROUP
    with Parallel(M, K) as (m, k):
        g, t = k // group, k % group
        e_idx = [g // groups_per_meta, m] if transpose_E else [m, g // groups_per_meta]
        word = tirx.Cast(
            "int32", tirx.BufferLoad(e_buf, [lo + i for lo, i in zip(e_min, e_idx, strict=True)])
        )
        nibble = tirx.bitwise_and(tirx.shift_right(word, (g % groups_per_meta) * BITS_PER_GROUP), 0xF)
        value = tirx.const(0, dtype)
        for i in reversed(range(kept)):
            if kept == 2:
                position = tirx.bitwise_and(tirx.shift_right(nibble, 2 * i), 3)
            else:  # one of two: the position of a pair of 16-bit halves
                position = tirx.shift_right(tirx.bitwise_and(nibble, 3), 1)
            a_idx = [g * kept + i, m] if transpose_A else [m, g * kept + i]
            stored = tirx.BufferLoad(a_buf, [lo + j for lo, j in zip(a_min, a_idx, strict=True)])
            value = tirx.Select(tirx.EQ(position, t), stored, value)
        B.buffer_store(dense, value, [k, m] if transpose_A else [m, k])
    gemm(
        dense, B_, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait, annotations=annotations
    )


class _KernelScope:
    """Moves the dense tiles ``T.gemm_sp`` allocates (possibly inside a ``T.Pipelined`` loop)
    to the kernel's own allocations, once parsing ends: a buffer allocated in a loop body
    would be out of scope where the pipeliner moves its statements."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []

    @classmethod
    def of_kernel(cls) -> _KernelScope:
        rewrites = current_session("T.gemm_sp").body_rewrites
        found = next((r for r in rewrites if isinstance(r, _KernelScope)), None)
        if found is None:
            found = cls()
            rewrites.append(found)
        return found

    def _ours(self, stmt: Any) -> bool:
        return isinstance(stmt, tirx.AllocBuffer) and any(stmt.buffer.same_as(b) for b in self.buffers)

    def __call__(self, body: Any) -> Any:
        moved: list[Any] = []

        def on_seq(seq: Any) -> Any:
            kept = [stmt for stmt in seq.seq if not self._ours(stmt)]
            if len(kept) == len(seq.seq):
                return seq
            moved.extend(stmt for stmt in seq.seq if self._ours(stmt))
            return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

        body = tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq))
        return _prepend_in_launch(body, moved) if moved else body


def _prepend_in_launch(stmt: Any, allocs: list[Any]) -> Any:
    """``stmt`` with ``allocs`` first in the body of its innermost thread launch."""
    if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
        inner = _prepend_in_launch(stmt.body, allocs)
        return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, inner, stmt.span)
    rest = list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]
    return tirx.SeqStmt([*allocs, *rest])
