"""CPU ``T.gemm``: register-blocked micro-kernels that LLVM keeps in vector registers.

A block runs on one core, so a tile gemm is a small dense matrix product. The C tile is
cut into ``mr x nr`` blocks; each block is loaded once into a local accumulator
(``mr * nr / lanes`` vector registers), updated over the whole K extent with
``broadcast(A[i, k]) * B[k, j:j+lanes]`` multiply-adds written out as explicit vector
expressions (one statement per accumulator register, so nothing depends on LLVM's
loop vectorizer), and stored back once. The column blocks are the outer loop so that
a packed B panel is reused by every row block.

Operands are read in place when they can be: B is packed into a ``K x nr`` panel of
the accumulator's type only when it is transposed, of another element type, or not
contiguous along N; A is converted into an ``M x K`` tile once when its element type
differs from the accumulator's (a broadcast reads any address, so a transposed A
needs no packing).

With bf16 operands, a float32 accumulator and a CPU with AVX-512 BF16, the products
use ``vdpbf16ps`` (two K steps per instruction): A is packed as K-pairs (one 32-bit
broadcast per row and pair) and B as pair-interleaved panels, both zero-padded to an
even K. Elsewhere bf16 goes through the float32 path (packed and converted), which is
also what ``bf16_dot=False`` forces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.ops import Gemm, LowerContext, Region, lower_gemm_loops

from .host import cpu_flags, llvm_cpu_has
from .ukernels import BF16_GEMM_SYMBOL, use_bf16_gemm_ukernel

VECTOR_REGISTERS_AVX512 = 32
VECTOR_REGISTERS_AVX2 = 16
PACK_A_LIMIT_BYTES = 256 * 1024
"""Largest A conversion tile kept on the stack; beyond it, A is converted at each broadcast."""
BF16_DOT_INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
BF16_CONVERT_INTRINSIC = "llvm.x86.avx512bf16.cvtne2ps2bf16.512"

Index = list[ir.Expr]


@dataclasses.dataclass(frozen=True)
class GemmSchedule:
    """How one ``T.gemm`` runs on the CPU.

    Attributes:
        lanes: accumulator elements per vector register.
        mr: rows of C per micro-kernel (unrolled).
        nr: columns of C per micro-kernel (a multiple of ``lanes``).
        bf16_dot: whether products use the AVX-512 BF16 dot-product instruction.
    """

    lanes: int
    mr: int
    nr: int
    bf16_dot: bool


def has_bf16_dot() -> bool:
    """Whether kernels may use ``vdpbf16ps`` (AVX-512 BF16): the host executes it and the
    LLVM CPU the code is generated for (``TILE_CPU_MCPU``, else the host's) has it. With only
    the first, LLVM aborts the process selecting the intrinsic ("Do not know how to split
    the result of this operator"), as a ``TILE_CPU_MCPU=skylake-avx512`` build on a
    Sapphire Rapids host did."""
    return "avx512_bf16" in cpu_flags() and llvm_cpu_has("avx512bf16")


def _dtype_bits(dtype: str) -> int:
    for width in (64, 32, 16, 8):
        if dtype.endswith(str(width)) or dtype.endswith(f"{width}fn"):
            return width
    if dtype.startswith("float8") or dtype.endswith("e5m2"):
        return 8
    return 32


def plan_schedule(
    m: int, n: int, acc_dtype: str, operand_dtype: str, vector_bits: int, bf16_dot: bool | None = None
) -> GemmSchedule:
    """Register blocking for an ``m x n`` C tile of ``acc_dtype`` on ``vector_bits`` registers.

    ``bf16_dot=None`` uses the dot-product instruction where the host has it.
    """
    lanes = max(1, vector_bits // _dtype_bits(acc_dtype))
    registers = VECTOR_REGISTERS_AVX512 if vector_bits >= 512 else VECTOR_REGISTERS_AVX2
    budget = registers - 6  # B vectors, the broadcast A value and loop state
    use_dot = (
        operand_dtype == "bfloat16"
        and acc_dtype == "float32"
        and vector_bits >= 512
        and (has_bf16_dot() if bf16_dot is None else bf16_dot)
    )
    chunks = max(1, min(2, -(-n // lanes)))
    if m < budget // chunks:
        # Few rows (GEMV-like): spend the registers on columns instead.
        chunks = max(1, min(budget // max(m, 1), 8, -(-n // lanes)))
    mr = max(1, min(m, budget // chunks))
    # Prefer a row count that divides m (no tail block) when it costs little.
    for cand in range(mr, max(mr // 2, 1) - 1, -1):
        if m % cand == 0:
            mr = cand
            break
    return GemmSchedule(lanes=lanes, mr=mr, nr=chunks * lanes, bf16_dot=use_dot)


def _dense_dims(region: Region) -> list[int]:
    """Buffer dims of a 2-D view: the two dense ones (unit-extent dims are skipped)."""
    if len(region.extents) == 2:
        return [0, 1]
    dims = [d for d, e in enumerate(region.extents) if not (isinstance(e, tirx.IntImm) and int(e.value) == 1)]
    if len(dims) < 2:
        # A 1 x K or K x 1 operand: keep the last unit dims as the view's dims.
        rest = [d for d in range(len(region.extents)) if d not in dims]
        dims = sorted(dims + rest[len(rest) - (2 - len(dims)) :])
    return dims


class _View:
    """Element (row, col) of a 2-D view of a region, optionally transposed."""

    def __init__(self, region: Region, transposed: bool = False) -> None:
        self.region = region
        self.dims = _dense_dims(region)
        self.transposed = transposed

    def index(self, row: ir.Expr, col: ir.Expr) -> Index:
        if self.transposed:
            row, col = col, row
        out = list(self.region.mins)
        out[self.dims[0]] = out[self.dims[0]] + row
        out[self.dims[1]] = out[self.dims[1]] + col
        return out

    def load(self, row: ir.Expr, col: ir.Expr) -> ir.Expr:
        return tirx.BufferLoad(self.region.buffer, self.index(row, col))

    def row_vector_ok(self) -> bool:
        """Whether consecutive columns are consecutive elements of the buffer."""
        inner = self.dims[0] if self.transposed else self.dims[1]
        return inner == len(self.region.buffer.shape) - 1

    def vector_index(self, row: ir.Expr, col: ir.Expr, width: int) -> Index:
        idx = self.index(row, col)
        if width > 1:
            idx[-1] = tirx.Ramp(idx[-1], 1, width)
        return idx


def _const(value: int) -> ir.Expr:
    return tirx.const(value, "int32")


def _local(name: str, size: int, dtype: str) -> Any:
    # TVM's CPU codegen keeps small "global"-scope allocations on the stack (an LLVM
    # alloca that SROA promotes to registers); "local" ones become heap workspaces.
    return tirx.decl_buffer((size,), dtype, name=name, scope="global")


def _flat(_buf: Any, offset: ir.Expr, width: int) -> Index:
    return [tirx.Ramp(offset, 1, width) if width > 1 else offset]


def _cast(dtype: str, value: ir.Expr) -> ir.Expr:
    return value if str(value.ty) == dtype else tirx.Cast(dtype, value)


def _chunks(cols: int, lanes: int) -> list[tuple[int, int]]:
    return [(c, min(lanes, cols - c)) for c in range(0, cols, lanes)]


def _seq(stmts: Sequence[Any]) -> Any:
    flat = [s for s in stmts if s is not None]
    return flat[0] if len(flat) == 1 else tirx.SeqStmt(flat)


def _for(name: str, extent: int, body: Callable[[ir.Var], Any], kind: Any = None) -> Any:
    var = tirx.Var(name, "int32")
    return tirx.For(var, 0, extent, kind or tirx.ForKind.SERIAL, body(var))


class _Lowering:
    """Builds the statements of one gemm (see the module docstring)."""

    def __init__(self, op: Gemm, m: int, n: int, k: int, sched: GemmSchedule) -> None:
        self.op, self.m, self.n, self.k, self.s = op, m, n, k, sched
        self.acc = op.c.dtype
        self.a = _View(op.a, op.transpose_a)
        self.b = _View(op.b, op.transpose_b)
        self.c = _View(op.c)
        self.prologue: list[Any] = []

    # -- operand sources -------------------------------------------------------------
    def a_source(self) -> Callable[[ir.Expr, ir.Expr], ir.Expr]:
        """``(row, k) -> scalar`` in the accumulator type (converting A once if needed)."""
        if self.op.a.dtype == self.acc:
            return self.a.load
        bytes_needed = self.m * self.k * _dtype_bits(self.acc) // 8
        if bytes_needed > PACK_A_LIMIT_BYTES:
            return lambda r, kk: _cast(self.acc, self.a.load(r, kk))
        packed = _local("A_packed", self.m * self.k, self.acc)
        self.prologue.append(tirx.AllocBuffer(packed))
        kk_ = self.k
        self.prologue.append(
            _for(
                "pi",
                self.m,
                lambda i: _for(
                    "pk",
                    self.k,
                    lambda kk: tirx.BufferStore(packed, _cast(self.acc, self.a.load(i, kk)), [i * kk_ + kk]),
                ),
            )
        )
        return lambda r, kk: tirx.BufferLoad(packed, [r * kk_ + kk])

    def b_direct(self) -> bool:
        return self.op.b.dtype == self.acc and self.b.row_vector_ok()

    # -- float path -------------------------------------------------------------------
    def micro(
        self,
        i0: ir.Expr,
        rows: int,
        cols: int,
        j0: ir.Expr,
        a_src: Callable[[ir.Expr, ir.Expr], ir.Expr],
        b_vec: Callable[[ir.Expr, int, int], ir.Expr],
    ) -> Any:
        """``C[i0:i0+rows, j0:j0+cols] += A' @ B'`` with the block held in registers.

        ``b_vec(k, col, width)`` loads ``width`` consecutive columns of row ``k`` of the
        block's B (accumulator type).
        """
        pieces = _chunks(cols, self.s.lanes)
        regs = _Accumulators(self.c, self.acc, i0, rows, j0, pieces)

        def step(kk: ir.Var) -> Any:
            b_vals = {c0: b_vec(kk, c0, w) for c0, w in pieces}
            body = []
            for r in range(rows):
                a_val = a_src(i0 + r, kk)
                for c0, w in pieces:
                    a_b = tirx.Broadcast(a_val, w) if w > 1 else a_val
                    body.append(regs.update(r, c0, regs.get(r, c0) + a_b * b_vals[c0]))
            return _seq(body)

        return regs.around(_for("kk", self.k, step))

    def float_path(self) -> list[Any]:
        s = self.s
        a_src = self.a_source()
        out = list(self.prologue)
        direct = self.b_direct()
        panel = None if direct else _local("B_panel", self.k * s.nr, self.acc)
        if panel is not None:
            out.append(tirx.AllocBuffer(panel))

        def column_block(j0: ir.Expr, cols: int) -> Any:
            stmts = []
            if panel is not None:
                transposed = self.transposed_panel(panel, j0, cols)
                stmts.append(
                    transposed
                    if transposed is not None
                    else _for(
                        "bk",
                        self.k,
                        lambda kk: _for(
                            "bj",
                            cols,
                            lambda jj: tirx.BufferStore(
                                panel, _cast(self.acc, self.b.load(kk, j0 + jj)), [kk * cols + jj]
                            ),
                        ),
                    )
                )

                def b_vec(kk: ir.Expr, c0: int, w: int) -> ir.Expr:
                    return tirx.BufferLoad(panel, _flat(panel, kk * cols + c0, w))
            else:

                def b_vec(kk: ir.Expr, c0: int, w: int) -> ir.Expr:
                    return tirx.BufferLoad(self.op.b.buffer, self.b.vector_index(kk, j0 + c0, w))

            stmts.extend(self.row_blocks(j0, cols, a_src, b_vec))
            return _seq(stmts)

        out.extend(self.column_blocks(column_block))
        return out

    def transposed_panel(self, panel: Any, j0: ir.Expr, cols: int) -> Any | None:
        """The panel ``B'[kk, j0 + jj]`` of a transposed B whose rows (one ``j``, consecutive
        ``kk``) are contiguous, as ``lanes x lanes`` blocks transposed in registers: ``lanes``
        row loads, ``log2(lanes)`` rounds of two-vector shuffles (round ``b`` swaps bit ``b`` of
        the vector number with bit ``b`` of the lane), ``lanes`` panel stores. Element by
        element the pack is a strided scatter (``vscatterqps``), which took 12% of the
        FlashAttention backward's time. None where the sizes or the layout do not fit."""
        lanes, buffer = self.s.lanes, self.op.b.buffer
        if not (
            self.b.transposed
            and self.op.b.dtype == self.acc
            and self.b.dims[1] == len(buffer.shape) - 1
            and lanes >= 2
            and lanes & (lanes - 1) == 0
            and cols % lanes == 0
            and self.k % lanes == 0
        ):
            return None
        vector = f"{self.acc}x{lanes}"

        def block(kb: ir.Var) -> Any:
            lets: list[tuple[Any, ir.Expr]] = []
            stores = []
            for c0 in range(0, cols, lanes):
                # rows[r][l] = B'[kb * lanes + l, j0 + c0 + r]; afterwards rows[l][r]
                rows: list[Any] = []
                for r in range(lanes):
                    var = tirx.Var(f"bt_{c0}_{r}", vector)
                    row = self.b.vector_index(kb * lanes, j0 + c0 + r, lanes)
                    lets.append((var, tirx.BufferLoad(buffer, row)))
                    rows.append(var)
                bit = 1
                while bit < lanes:
                    swapped = list(rows)
                    for lo in (v for v in range(lanes) if not v & bit):
                        hi = lo | bit
                        pair = [rows[lo], rows[hi]]
                        low = [_const(x if not x & bit else lanes + (x ^ bit)) for x in range(lanes)]
                        high = [_const(x | bit if not x & bit else lanes + x) for x in range(lanes)]
                        for v, order in ((lo, low), (hi, high)):
                            var = tirx.Var(f"bt_{c0}_{bit}_{v}", vector)
                            lets.append((var, tirx.Shuffle(pair, order)))
                            swapped[v] = var
                    rows = swapped
                    bit *= 2
                for kk in range(lanes):
                    offset = (kb * lanes + kk) * cols + c0
                    stores.append(tirx.BufferStore(panel, rows[kk], _flat(panel, offset, lanes)))
            return _seq([*(tirx.Bind(var, value) for var, value in lets), *stores])

        return _for("bt", self.k // lanes, block)

    # -- blocking -----------------------------------------------------------------------
    def column_blocks(self, column_block: Callable[[ir.Expr, int], Any]) -> list[Any]:
        nr, full = self.s.nr, self.n // self.s.nr
        out = []
        if full:
            out.append(_for("jo", full, lambda jo: column_block(jo * nr, nr)))
        if self.n % nr:
            out.append(column_block(_const(full * nr), self.n % nr))
        return out

    def row_blocks(self, j0: ir.Expr, cols: int, a_src: Any, b_vec: Any) -> list[Any]:
        mr, full = self.s.mr, self.m // self.s.mr
        out = []
        if full:
            out.append(_for("io", full, lambda io: self.micro(io * mr, mr, cols, j0, a_src, b_vec)))
        if self.m % mr:
            out.append(self.micro(_const(full * mr), self.m % mr, cols, j0, a_src, b_vec))
        return out

    # -- bf16 dot-product path ----------------------------------------------------------
    def bf16_path(self) -> list[Any]:
        """``vdpbf16ps``: C[i, j] += A[i, 2p] * B[2p, j] + A[i, 2p+1] * B[2p+1, j].

        The packed operands hold the bf16 values widened to float32 (exact), because
        TVM gives no bf16 vector type to LLVM: ``vcvtne2ps2bf16`` turns them back into
        bf16 registers (exact too) right before the dot product. A is packed as
        ``M x K/2`` pairs (one 64-bit broadcast per row and pair); B as a panel of
        pair-interleaved columns, padded with zero columns to whole registers.
        """
        s, kp = self.s, (self.k + 1) // 2
        a_pairs = _local("A_pairs", self.m * kp * 2, "float32")
        width = -(-s.nr // s.lanes) * s.lanes
        panel = _local("B_pairs", kp * width * 2, "float32")

        def pack_a(i: ir.Var) -> Any:
            def one(kk: ir.Var) -> Any:
                value = _cast("float32", self.a.load(i, kk))
                return tirx.BufferStore(a_pairs, value, [i * (2 * kp) + kk])

            def pad() -> Any:
                return tirx.BufferStore(a_pairs, tirx.const(0, "float32"), [i * (2 * kp) + self.k])

            # Contiguous rows vectorize (widening bf16 is a shift); an odd K pads one zero.
            kind = tirx.ForKind.VECTORIZED if not self.op.transpose_a and self.k <= 256 else None
            return _seq([_for("ak", self.k, one, kind), pad() if self.k % 2 else None])

        out = [tirx.AllocBuffer(a_pairs), tirx.AllocBuffer(panel), _for("ai", self.m, pack_a)]

        def column_block(j0: ir.Expr, cols: int) -> Any:
            padded = -(-cols // s.lanes) * s.lanes

            def pack_b(p: ir.Var) -> Any:
                if self.b_direct_rows() and self.k % 2 == 0 and cols == padded:
                    return self.interleave_rows(panel, p, j0, padded)

                def one(jj: ir.Var) -> Any:
                    stmts = []
                    for t in range(2):
                        kk = p * 2 + t
                        inside = tirx.And(kk < self.k, jj < cols)
                        load = self.b.load(_min(kk, self.k - 1), j0 + _min(jj, cols - 1))
                        value = tirx.if_then_else(inside, _cast("float32", load), tirx.const(0, "float32"))
                        stmts.append(tirx.BufferStore(panel, value, [(p * padded + jj) * 2 + t]))
                    return _seq(stmts)

                return _for("bj", padded, one)

            pieces = _chunks(cols, s.lanes)
            mr, full = s.mr, self.m // s.mr
            rows = []
            if full:
                rows.append(
                    _for(
                        "io",
                        full,
                        lambda io: self.dot_micro(io * mr, mr, j0, pieces, padded, kp, a_pairs, panel),
                    )
                )
            if self.m % mr:
                rows.append(
                    self.dot_micro(_const(full * mr), self.m % mr, j0, pieces, padded, kp, a_pairs, panel)
                )
            return _seq([_for("bp", kp, pack_b), *rows])

        out.extend(self.column_blocks(column_block))
        return out

    def b_direct_rows(self) -> bool:
        """Whether a row of B (fixed k, consecutive n) is consecutive in memory."""
        return self.b.row_vector_ok()

    def interleave_rows(self, panel: Any, p: ir.Expr, j0: ir.Expr, padded: int) -> Any:
        """Panel row ``p``: rows ``2p`` and ``2p+1`` of B, widened and interleaved by pairs."""
        lanes = self.s.lanes
        half = lanes // 2
        stmts = []
        for c0 in range(0, padded, lanes):
            rows = [
                _cast(
                    f"float32x{lanes}",
                    tirx.BufferLoad(self.op.b.buffer, self.b.vector_index(p * 2 + t, j0 + c0, lanes)),
                )
                for t in range(2)
            ]
            for h in range(2):
                order = [_const(x) for j in range(h * half, (h + 1) * half) for x in (j, lanes + j)]
                base = (p * padded + c0) * 2 + h * lanes
                stmts.append(tirx.BufferStore(panel, tirx.Shuffle(rows, order), _flat(panel, base, lanes)))
        return _seq(stmts)

    def dot_micro(
        self,
        i0: ir.Expr,
        rows: int,
        j0: ir.Expr,
        pieces: list[tuple[int, int]],
        padded: int,
        kp: int,
        a_pairs: Any,
        panel: Any,
    ) -> Any:
        lanes = self.s.lanes
        regs = _Accumulators(self.c, "float32", i0, rows, j0, pieces, register_lanes=lanes)
        bf16x32 = f"uint16x{2 * lanes}"  # the bits of 32 bf16 values (see bf16_path)

        def step(p: ir.Var) -> Any:
            b_vals = {}
            for c0, _ in pieces:
                base = (p * padded + c0) * 2
                low = tirx.BufferLoad(panel, _flat(panel, base, lanes))
                high = tirx.BufferLoad(panel, _flat(panel, base + lanes, lanes))
                b_vals[c0] = tirx.call_llvm_pure_intrin(bf16x32, BF16_CONVERT_INTRINSIC, high, low)
            body = []
            for r in range(rows):
                pair = tirx.BufferLoad(a_pairs, _flat(a_pairs, (i0 + r) * (2 * kp) + p * 2, 2))
                spread = tirx.reinterpret(
                    f"float32x{lanes}", tirx.Broadcast(tirx.reinterpret("float64", pair), lanes // 2)
                )
                a_vec = tirx.call_llvm_pure_intrin(bf16x32, BF16_CONVERT_INTRINSIC, spread, spread)
                for c0, _ in pieces:
                    value = tirx.call_llvm_pure_intrin(
                        f"float32x{lanes}", BF16_DOT_INTRINSIC, regs.get(r, c0), a_vec, b_vals[c0]
                    )
                    body.append(regs.update(r, c0, value))
            return _seq(body)

        return regs.around(_for("kp", kp, step))


class _Accumulators:
    """One small local buffer per accumulator register of a micro-kernel's C block.

    Separate buffers (rather than one ``rows x cols`` array) stay under TVM's stack
    allocation limit, so each is an LLVM ``alloca`` that SROA turns into a register;
    a larger local array would be a heap workspace that LLVM must keep in memory.
    With ``register_lanes``, every register is that wide even where the C block's
    last piece is narrower (the extra lanes start at zero and are never stored).
    """

    def __init__(
        self,
        c: _View,
        dtype: str,
        i0: ir.Expr,
        rows: int,
        j0: ir.Expr,
        pieces: list[tuple[int, int]],
        register_lanes: int | None = None,
    ) -> None:
        self.c, self.i0, self.j0, self.dtype = c, i0, j0, dtype
        self.width = dict(pieces)
        self.lanes = {c0: register_lanes or w for c0, w in pieces}
        self.bufs = {
            (r, c0): _local(f"acc_{r}_{c0}", self.lanes[c0], dtype) for r in range(rows) for c0, _ in pieces
        }

    def get(self, r: int, c0: int) -> ir.Expr:
        return tirx.BufferLoad(self.bufs[r, c0], _flat(None, _const(0), self.lanes[c0]))

    def update(self, r: int, c0: int, value: ir.Expr) -> Any:
        return tirx.BufferStore(self.bufs[r, c0], value, _flat(None, _const(0), self.lanes[c0]))

    def around(self, loop: Any) -> Any:
        """Allocate, load the C block, run ``loop``, store the C block back."""
        load, store = [], []
        for (r, c0), buf in self.bufs.items():
            w, lanes = self.width[c0], self.lanes[c0]
            c_idx = self.c.vector_index(self.i0 + r, self.j0 + c0, w)
            c_buf = self.c.region.buffer
            if w < lanes:
                load.append(self.update(r, c0, tirx.Broadcast(tirx.const(0, self.dtype), lanes)))
            load.append(tirx.BufferStore(buf, tirx.BufferLoad(c_buf, c_idx), _flat(None, _const(0), w)))
            store.append(tirx.BufferStore(c_buf, tirx.BufferLoad(buf, _flat(None, _const(0), w)), c_idx))
        allocs = [tirx.AllocBuffer(b) for b in self.bufs.values()]
        return _seq([*allocs, *load, loop, *store])


def _min(a: ir.Expr, b: int) -> ir.Expr:
    return tirx.Min(a, tirx.const(b, "int32"))


def _ints(exprs: Sequence[ir.Expr]) -> list[int] | None:
    out = []
    for e in exprs:
        if not isinstance(e, tirx.IntImm):
            return None
        out.append(int(e.value))
    return out


def lower_gemm_cpu(
    op: Any, ctx: LowerContext, bf16_dot: bool | None = None, ukernel: bool | None = None
) -> Any:
    """The CPU rule for ``T.gemm`` (see the module docstring); loops where it cannot apply.

    The loop-nest rule stays for symbolic tile shapes, accumulators the register
    kernel does not cover (non-float) and C views that are not contiguous along N.
    bf16 operands with a float32 accumulator call the C micro-kernel (ukernels.py)
    where ``ukernel`` (default: the host has AVX-512 BF16, the library builds and
    ``TILE_CPU_BF16_UKERNEL`` is on) allows it and every view has unit column stride.
    """
    assert isinstance(op, Gemm)
    sizes = _ints(op.mnk)
    acc = op.c.dtype
    if (
        sizes is None
        or not acc.startswith("float")
        or acc.startswith("float8")
        or not _View(op.c).row_vector_ok()
    ):
        return lower_gemm_loops(op, ctx)
    m, n, k = sizes
    if m == 0 or n == 0:
        return tirx.Evaluate(0)
    call = _bf16_ukernel_call(op, m, n, k, ukernel, bf16_dot)
    if call is not None:
        return call
    sched = plan_schedule(m, n, acc, op.a.dtype, ctx.capabilities.vector_bits, bf16_dot)
    lowering = _Lowering(op, m, n, k, sched)
    stmts = []
    if op.clear_accum:
        stmts.append(_clear(lowering.c, m, n, acc))
    if k > 0:
        stmts.extend(lowering.bf16_path() if sched.bf16_dot else lowering.float_path())
    return _seq(stmts) if stmts else tirx.Evaluate(0)


def _clear(c: _View, m: int, n: int, dtype: str) -> Any:
    def row(i: ir.Var) -> Any:
        return _for(
            "cj",
            n,
            lambda j: tirx.BufferStore(c.region.buffer, tirx.const(0, dtype), c.index(i, j)),
            tirx.ForKind.VECTORIZED if n <= 64 else None,
        )

    return _for("ci", m, row)


def _row_stride(region: Region, dims: list[int]) -> ir.Expr | None:
    """Elements between consecutive rows of a 2-D view whose columns are the buffer's last dim."""
    buf = region.buffer
    if len(buf.strides) or dims[1] != len(buf.shape) - 1:
        return None
    stride: ir.Expr = tirx.const(1, "int32")
    for extent in list(buf.shape)[dims[0] + 1 :]:
        stride = stride * _cast("int32", extent)
    return stride


def _bf16_ukernel_call(op: Gemm, m: int, n: int, k: int, ukernel: bool | None, bf16_dot: bool | None) -> Any:
    """``tile_bf16_gemm_f32acc(...)`` for a bf16 x bf16 -> float32 gemm, or None where it does not apply."""
    if not (op.a.dtype == op.b.dtype == "bfloat16" and op.c.dtype == "float32"):
        return None
    if ukernel is None:
        # A pinned ``bf16_dot`` asks for one of the generated-code paths.
        ukernel = bf16_dot is None and use_bf16_gemm_ukernel()
    if not ukernel:
        return None
    strides: list[ir.Expr] = []
    pointers: list[ir.Expr] = []
    nexts: list[ir.Expr] = []
    for region in (op.a, op.b, op.c):
        stride = _row_stride(region, _dense_dims(region))
        if stride is None:
            return None
        strides.append(stride)
        # The address of the next element along the row too: TVM widens allocated bf16
        # buffers to float32 storage after lowering, and the distance tells the kernel which.
        mins = list(region.mins)
        pointers.append(tirx.address_of(tirx.BufferLoad(region.buffer, mins)))
        mins[-1] = mins[-1] + 1
        nexts.append(tirx.address_of(tirx.BufferLoad(region.buffer, mins)))
    return tirx.Evaluate(
        tirx.call_extern(
            "int32",
            BF16_GEMM_SYMBOL,
            _const(m), _const(n), _const(k),
            pointers[0], nexts[0], strides[0], pointers[1], nexts[1], strides[1], pointers[2], strides[2],
            _const(int(op.transpose_a)), _const(int(op.transpose_b)), _const(0 if op.clear_accum else 1),
        )
    )
