"""``TensorCoreIntrinEmitter``: TileLang's generator of hand-written warp MMA code (expert
tier), on tile's ``T.ptx_ldmatrix`` / ``T.ptx_mma`` (CUDA sm_80+).

A block of ``block_row_warps x block_col_warps`` warps computes a ``block_M x block_N``
tile; each warp owns ``warp_row_tiles x warp_col_tiles`` of it, cut into 16 x ``n_dim``
pieces (``n_dim`` 16: two ``mma.m16n8k*`` each, 8 when the warp tile is not a multiple
of 16). The per-thread register arrays the caller allocates hold, per piece, the PTX
fragment elements in order: ``A_local[i * local_size_a + e]`` is ``a_e`` of row piece
``i``; ``B_local[j * local_size_b + e]`` is ``b_e`` of column piece ``j`` (the second n8
instruction's from ``local_size_b // 2``); ``C_local[(i * warp_cols + j) * local_size_out
+ e]`` is ``c_e`` (the second instruction's from ``local_size_out // 2``). Warp ``w``
of the block is row ``w % block_row_warps``, column ``w // block_row_warps``
(``is_m_first``: column ``w % block_col_warps``, row ``w // block_col_warps``).

Each method emits its statements into the kernel being parsed, at the caller's line.

Example (float16 operands, B stored ``[N][K]``; see ``tile.lang.cuda.intrinsics``)::

    mma = TensorCoreIntrinEmitter("float16", "float16", "float32", b_transposed=True,
                                  block_row_warps=2, block_col_warps=2,
                                  warp_row_tiles=32, warp_col_tiles=32, chunk=32)
    for ki in T.serial(block_K // mma.micro_size_k):
        mma.ldmatrix_a(A_local, A_shared, ki)
        mma.ldmatrix_b(B_local, B_shared, ki)
        mma.mma(A_local, B_local, C_local)
    mma.stmatrix(C_local, C_shared)
"""

from __future__ import annotations

from typing import Any

from tvm import tirx  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.layout import dtype_bits

from ..errors import TileTypeError
from .builtins import get_thread_binding as _thread_binding
from .dtypes import dtype_name
from .mma_layouts import ldmatrix_lane_offset, mma_a_element, mma_b_element, mma_c_element
from .warp_mma import ptx_ldmatrix, ptx_mma

ABBREVIATIONS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "int8": "int8",
                 "uint8": "uint8", "int32": "int32"}  # fmt: skip
"""Element types as PTX abbreviates them (``emitter.a_dtype_abbrv``)."""

ACCUMULATORS = {"float16": ("float32", "float16"), "bfloat16": ("float32",), "int8": ("int32",),
                "uint8": ("int32",)}  # fmt: skip
"""Operand type -> the accumulator types tile's ``mma.sync`` forms have for it."""


def _region(buffer: Any, what: str) -> tuple[Any, list[Any]]:
    """``(buffer, [start of each dim])`` of a shared tile passed whole or as a region."""
    if tirx.is_buffer_var(buffer):
        return buffer, [tirx.const(0, "int32")] * len(buffer.shape)
    if isinstance(buffer, tirx.BufferRegion):
        return buffer.buffer, [r.min for r in buffer.region]
    raise TileTypeError(
        f"{what} takes a shared buffer (or a region of one), got {type(buffer).__name__}",
        hint="pass the T.alloc_shared buffer itself",
    )


def _at(starts: list[Any], row: Any, col: Any) -> tuple[Any, ...]:
    """Indices of ``(row, col)`` of the last two dims, from the region's starts."""
    return (*starts[:-2], starts[-2] + row, starts[-1] + col)


class TensorCoreIntrinEmitter:
    """Emits ``ldmatrix`` / ``mma.sync`` code for a block's warps (see the module docstring)."""

    M_DIM = 16
    WARP_SIZE = 32
    _is_meta_class = True
    """TVMScript binds an emitter made in a kernel body as a Python value (TileLang's eager bodies)."""

    def __init__(
        self, a_dtype: Any = "float16", b_dtype: Any = "float16", accum_dtype: Any = "float16",
        a_transposed: bool = False, b_transposed: bool = False,
        block_row_warps: int = 2, block_col_warps: int = 2, warp_row_tiles: int = 8, warp_col_tiles: int = 8,
        chunk: int = 16, reduce_k: int = 1, num_elems_per_byte: int = 1,
        is_m_first: bool | None = False, thread_var: Any = None,
    ) -> None:  # fmt: skip
        self.a_dtype, self.b_dtype = dtype_name(a_dtype), dtype_name(b_dtype)
        self.accum_dtype = dtype_name(accum_dtype)
        allowed = ACCUMULATORS.get(self.a_dtype, ())
        if self.a_dtype != self.b_dtype or self.accum_dtype not in allowed:
            forms = "; ".join(f"{a} -> {' or '.join(c)}" for a, c in ACCUMULATORS.items())
            raise TileTypeError(
                f"TensorCoreIntrinEmitter: {self.a_dtype} x {self.b_dtype} -> {self.accum_dtype} is not "
                "an mma.sync form tile issues",
                hint=f"use the same type for A and B: {forms}",
            )
        bits = dtype_bits(self.a_dtype)
        self.k_dim = 256 // bits  # one instruction reads 32 bytes of K per row
        if warp_row_tiles % 16 or warp_col_tiles % 8 or chunk % self.k_dim:
            raise TileTypeError(
                f"TensorCoreIntrinEmitter: warp tile {warp_row_tiles} x {warp_col_tiles}, chunk {chunk}",
                hint=f"warp_row_tiles must be a multiple of 16, warp_col_tiles of 8 and chunk of "
                f"{self.k_dim} (K of one {self.a_dtype} instruction)",
            )
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = block_row_warps, block_col_warps
        self.warp_row_tiles, self.warp_col_tiles = warp_row_tiles, warp_col_tiles
        self.chunk, self.reduce_k, self.num_elems_per_byte = chunk, reduce_k, num_elems_per_byte
        self.is_m_first = bool(is_m_first)
        self.thread_var = thread_var
        self.n_dim = 16 if warp_col_tiles % 16 == 0 else 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = self.M_DIM, self.n_dim, self.k_dim
        self.warp_rows, self.warp_cols = warp_row_tiles // self.M_DIM, warp_col_tiles // self.n_dim
        self.mma_num_inst_m, self.mma_num_inst_n = self.warp_rows, self.warp_cols  # mma_atom's indices
        self.local_size_a = self.M_DIM * self.k_dim // self.WARP_SIZE
        self.local_size_b = self.n_dim * self.k_dim // self.WARP_SIZE
        self.local_size_out = self.M_DIM * self.n_dim // self.WARP_SIZE
        self.a_dtype_abbrv = ABBREVIATIONS[self.a_dtype]
        self.b_dtype_abbrv = ABBREVIATIONS[self.b_dtype]
        self.accum_dtype_abbrv = ABBREVIATIONS[self.accum_dtype]
        self.mma_prefix = f"m16n8k{self.k_dim}"
        self.threads = self.WARP_SIZE * block_row_warps * block_col_warps * reduce_k

    # ---- threads

    def get_thread_binding(self) -> Any:
        """The thread index the emitted code reads (``thread_var``, else the kernel's)."""
        return self.thread_var if self.thread_var is not None else _thread_binding()

    def extract_thread_binding(self, thread_id: Any, is_m_first: bool | None = None) -> tuple[Any, Any, Any]:
        """``(lane, warp_n, warp_m)`` of ``thread_id``."""
        lane, warp = thread_id % self.WARP_SIZE, thread_id // self.WARP_SIZE
        if self.is_m_first if is_m_first is None else is_m_first:
            return lane, warp % self.block_col_warps, warp // self.block_col_warps % self.block_row_warps
        return lane, warp // self.block_row_warps % self.block_col_warps, warp % self.block_row_warps

    # ---- loads

    def _k_start(self, ki: Any, rk: Any) -> Any:
        return rk * self.chunk + ki * self.k_dim

    def ldmatrix_a(self, A_local_buf: Any, A_shared_buf: Any, ki: Any, rk: Any = 0) -> None:
        """Load this warp's A pieces of K step ``ki`` into ``A_local_buf`` (``ldmatrix``, or
        element loads for a K-major 8-bit tile, which ``ldmatrix`` cannot transpose)."""
        buffer, starts = _region(A_shared_buf, "ldmatrix_a")
        lane, _, warp_m = self.extract_thread_binding(self.get_thread_binding())
        k0 = self._k_start(ki, rk)
        by_ldmatrix = dtype_bits(self.a_dtype) == 16 or not self.a_transposed
        for i in range(self.warp_rows):
            m0 = warp_m * self.warp_row_tiles + i * self.M_DIM
            base = i * self.local_size_a
            if by_ldmatrix:
                row, col = ldmatrix_lane_offset("A", lane, self.a_dtype, self.a_transposed)
                at = _at(starts, k0 + row, m0 + col) if self.a_transposed else _at(starts, m0 + row, k0 + col)
                ptx_ldmatrix(self.a_transposed, 4, buffer[at], A_local_buf[base])
                continue
            with B.unroll(0, self.local_size_a) as e:
                m, k = mma_a_element(lane, e, self.k_dim)
                at = _at(starts, k0 + k, m0 + m) if self.a_transposed else _at(starts, m0 + m, k0 + k)
                B.buffer_store(A_local_buf, tirx.BufferLoad(buffer, list(at)), [base + e])

    def ldmatrix_b(self, B_local_buf: Any, B_shared_buf: Any, ki: Any, rk: Any = 0) -> None:
        """Load this warp's B pieces of K step ``ki`` into ``B_local_buf`` (``ldmatrix``, or
        element loads for an N-major 8-bit tile)."""
        buffer, starts = _region(B_shared_buf, "ldmatrix_b")
        lane, warp_n, _ = self.extract_thread_binding(self.get_thread_binding())
        k0 = self._k_start(ki, rk)
        by_ldmatrix = dtype_bits(self.b_dtype) == 16 or self.b_transposed
        per_instruction = 8 * self.k_dim // self.WARP_SIZE
        for j in range(self.warp_cols):
            n0 = warp_n * self.warp_col_tiles + j * self.n_dim
            base = j * self.local_size_b
            if by_ldmatrix:
                num = 4 if self.n_dim == 16 else 2
                row, col = ldmatrix_lane_offset("B", lane, self.b_dtype, self.b_transposed, num)
                at = _at(starts, n0 + row, k0 + col) if self.b_transposed else _at(starts, k0 + row, n0 + col)
                ptx_ldmatrix(not self.b_transposed, num, buffer[at], B_local_buf[base])
                continue
            with B.unroll(0, self.local_size_b) as e:
                k, n = mma_b_element(lane, e % per_instruction, self.k_dim)
                n = n + 8 * (e // per_instruction)
                at = _at(starts, n0 + n, k0 + k) if self.b_transposed else _at(starts, k0 + k, n0 + n)
                B.buffer_store(B_local_buf, tirx.BufferLoad(buffer, list(at)), [base + e])

    # ---- products

    def mma(self, A_local_buf: Any, B_local_buf: Any, C_local_buf: Any, k_inner: Any = 0) -> None:
        """``C += A * B`` over all of this warp's pieces."""
        for i in range(self.warp_rows):
            for j in range(self.warp_cols):
                self.mma_atom(A_local_buf, B_local_buf, C_local_buf, i, j, k_inner)

    def mma_atom(
        self, A_local_buf: Any, B_local_buf: Any, C_local_buf: Any, inst_m_idx: Any, inst_n_idx: Any,
        k_inner: Any = 0,
    ) -> None:  # fmt: skip
        """``C += A * B`` for piece ``(inst_m_idx, inst_n_idx)``: one or two ``mma.sync``.
        ``k_inner`` steps through K slices kept side by side in fragment (not local) buffers."""
        a_step = k_inner * self.warp_rows * self.local_size_a if _is_fragment(A_local_buf) else 0
        b_step = k_inner * self.warp_cols * self.local_size_b if _is_fragment(B_local_buf) else 0
        a = a_step + inst_m_idx * self.local_size_a
        b = b_step + inst_n_idx * self.local_size_b
        c = (inst_m_idx * self.warp_cols + inst_n_idx) * self.local_size_out
        for half in range(self.n_dim // 8):
            ptx_mma(
                self.accum_dtype, self.mma_prefix, "row", "col",
                self.a_dtype_abbrv, self.b_dtype_abbrv, self.accum_dtype_abbrv,
                A_local_buf, a,
                B_local_buf, b + half * self.local_size_b // 2,
                C_local_buf, c + half * self.local_size_out // 2,
                False,
            )  # fmt: skip

    # ---- stores

    def stmatrix(self, C_local_buf: Any, C_buf: Any, pid_m: Any = None, pid_n: Any = None) -> None:
        """Store this warp's accumulators into ``C_buf``: a 2-D tile of the block, a 4-D one
        indexed ``[piece_m, piece_n, row, col]``, or with ``pid_m``/``pid_n`` the 2-D global
        matrix at block ``(pid_m, pid_n)``. Values are converted to ``C_buf``'s type."""
        dims = len(C_buf.shape)
        if dims not in (2, 4) or (pid_m is not None and dims != 2):
            raise TileTypeError(
                f"stmatrix stores into a 2-D or 4-D buffer, got {dims}-D {C_buf.name}",
                hint="C_shared of shape (block_M, block_N) or (block_M // 16, block_N // n, 16, n)",
            )
        lane, warp_n, warp_m = self.extract_thread_binding(self.get_thread_binding())
        piece_m0, piece_n0 = warp_m * self.warp_rows, warp_n * self.warp_cols
        if pid_m is not None and pid_n is not None:
            piece_m0 = piece_m0 + pid_m * self.block_row_warps * self.warp_rows
            piece_n0 = piece_n0 + pid_n * self.block_col_warps * self.warp_cols
        loops = B.serial(0, self.warp_rows), B.serial(0, self.warp_cols), B.unroll(0, self.local_size_out)
        with loops[0] as i, loops[1] as j, loops[2] as e:
            row, col = mma_c_element(lane, e)
            value = tirx.BufferLoad(C_local_buf, [(i * self.warp_cols + j) * self.local_size_out + e])
            if str(C_local_buf.dtype) != str(C_buf.dtype):
                value = tirx.Cast(str(C_buf.dtype), value)
            if dims == 4:
                at = [piece_m0 + i, piece_n0 + j, row, col]
            else:
                at = [(piece_m0 + i) * self.M_DIM + row, (piece_n0 + j) * self.n_dim + col]
            B.buffer_store(C_buf, value, at)


def _is_fragment(buffer: Any) -> bool:
    return tirx.is_buffer_var(buffer) and str(buffer.scope()) == "local.fragment"
