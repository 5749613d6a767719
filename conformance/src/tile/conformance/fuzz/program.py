"""The description of one fuzz program: plain data, printable as a reproducer.

A program loads a ``(bm, bn)`` tile ``W`` of ``X`` per block (a plain ``T.copy``, or a
``T.Pipelined`` loop that sums the column chunks of ``X``), rewrites it element-wise in
``T.Parallel`` (a chain of operations, with or without named values, with or without a
bounds guard written inline or through named row/column values), and ends with one
epilogue: a store, a reduction, a prefix sum, a GEMM with ``W`` as the A operand, or an
atomic fold of every block's tile into one output. Sizes are ragged (``M``, ``N`` need
not be multiples of the tile), so tails are always exercised.

Out-of-range elements of a loaded tile read as 0 (``T.copy``'s contract); the
element-wise chain then applies to them too, unless guarded.
"""

from __future__ import annotations

import dataclasses
import math

FLOAT_OPS = ("add", "mul", "max", "min", "neg", "abs", "square")
INT_OPS = ("add", "mul", "max", "min", "neg", "abs")
UNSIGNED_OPS = ("add", "mul", "max", "min")  # with positive constants: nothing wraps
EPILOGUES = ("store", "reduce", "cumsum", "gemm", "atomic")
REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")
ATOMIC_KINDS = ("add", "max", "min")


@dataclasses.dataclass(frozen=True)
class Program:
    """One generated tile program (see the module docstring)."""

    dtype: str
    M: int
    N: int
    bm: int
    bn: int
    threads: int
    scope: str  # "shared" | "fragment": where W lives
    stages: int | None  # None: W = T.copy of X's tile; k: T.Pipelined(num_stages=k) sum of column chunks
    ops: tuple[tuple[str, float], ...]  # element-wise chain applied to W
    style: str  # "inline": W[i, j] = f(W[i, j]); "named": one named value per operation
    guard: str  # "none" | "inline" (if by*bm+i < M and ...) | "named" (r = ...; c = ...; if r < M ...)
    epilogue: str
    reduce_kind: str = "sum"
    dim: int = 0  # reduce / cumsum dim
    clear: bool = True  # reduce: clear the destination first (else fold into `init`)
    init: float = 0.0  # reduce with clear=False: the destination's starting value
    reverse: bool = False  # cumsum
    bo: int = 16  # gemm: columns of the B operand
    trans_a: bool = False
    trans_b: bool = False
    atomic_kind: str = "add"

    # -- derived shapes -------------------------------------------------------------------

    @property
    def pipelined(self) -> bool:
        return self.stages is not None

    @property
    def grid(self) -> tuple[int, int]:
        """(gx, gy): blocks over columns and rows (one column block when pipelined)."""
        gx = 1 if self.pipelined else math.ceil(self.N / self.bn)
        return gx, math.ceil(self.M / self.bm)

    @property
    def chunks(self) -> int:
        return math.ceil(self.N / self.bn)

    @property
    def gemm_dims(self) -> tuple[int, int]:
        """(rows of C, K) of the GEMM with W as A (transposed: W is (K, rows))."""
        return (self.bn, self.bm) if self.trans_a else (self.bm, self.bn)

    @property
    def b_shape(self) -> tuple[int, int]:
        """Shape of the B input (a dummy (1, 1) unless the epilogue is a GEMM)."""
        if self.epilogue != "gemm":
            return (1, 1)
        _, k = self.gemm_dims
        return (self.bo, k) if self.trans_b else (k, self.bo)

    @property
    def store_shape(self) -> tuple[int, int]:
        """Y of a store/cumsum epilogue: X's shape, or (M, bn) when the loop folded the columns."""
        return (self.M, self.bn) if self.pipelined else (self.M, self.N)

    @property
    def y_shape(self) -> tuple[int, ...]:
        gx, gy = self.grid
        if self.epilogue in ("store", "cumsum"):
            return self.store_shape
        if self.epilogue == "reduce":
            return (gy, gx, self.bn if self.dim == 0 else self.bm)
        if self.epilogue == "gemm":
            rows, _ = self.gemm_dims
            return (gy, gx, rows, self.bo)
        return (self.bm, self.bn)  # atomic

    @property
    def y_dtype(self) -> str:
        return "float32" if self.epilogue == "gemm" else self.dtype

    def describe(self) -> str:
        """One line for reports: the non-default fields."""
        fields = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.default is dataclasses.MISSING or value != f.default:
                fields.append(f"{f.name}={value!r}")
        return f"Program({', '.join(fields)})"
