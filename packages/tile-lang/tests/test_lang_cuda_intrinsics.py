"""TileLang's hand-written MMA helpers (``tile.lang.cuda.intrinsics``) and the expert names under
them (``T.ptx_ldmatrix``, ``T.ptx_mma``).

* Fragment ownership against the ISA oracle (``tile.testsupport.isa_tables``): the rows each
  lane hands ``ldmatrix`` are fed to the reference ldmatrix, and every register half must hold
  the element PTX's mma fragment tables put there; the element-wise maps are the tables.
* ``get_swizzle_layout`` is a bijection whose ldmatrix matrices are bank-conflict free.
* Whole GEMMs written with ``TensorCoreIntrinEmitter`` on the CUDA emulator (sm_80) against
  numpy, float16 and int8, A and B stored either way round.
* nvcc compiles them to HMMA / IMMA and LDSM; targets without the instructions refuse the
  kernel at the user's line.
"""

from __future__ import annotations

import functools
import itertools

import ml_dtypes
import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.lang.cuda.intrinsics import TensorCoreIntrinEmitter, get_ldmatrix_offset, get_swizzle_layout
from tile.lang.cuda.intrinsics.layout.utils import mma_store_index_map
from tile.lang.errors import TileTypeError
from tile.testsupport import isa_tables as isa
from tile.testsupport.markers import needs_backend, needs_cuobjdump, needs_nvcc

SM80 = {"kind": "cuda", "arch": "sm_80"}


# ----------------------------------------------------------------------------- the ISA oracle
def _stored_shape(operand: str, transposed: bool, k: int) -> tuple[int, int]:
    """A: [16][k] ([k][16] transposed); B (two n8 instructions): [k][16] ([16][k] transposed)."""
    k_first = (operand == "A") == transposed
    return (k, 16) if k_first else (16, k)


def _logical(transposed: bool, row: int, col: int) -> tuple[int, int]:
    """A's (m, k) or B's (k, n) of stored element (row, col): A [M][K] / B [K][N] unless transposed."""
    return (col, row) if transposed else (row, col)


@pytest.mark.parametrize(
    "dtype, operand, transposed",
    [("float16", "A", False), ("float16", "A", True), ("float16", "B", False), ("float16", "B", True),
     ("int8", "A", False), ("int8", "B", True)],
)  # fmt: skip
def test_ldmatrix_rows_deliver_the_ptx_mma_fragments(dtype, operand, transposed):
    elem = 2 if dtype == "float16" else 1
    k = 32 // elem
    rows, cols = _stored_shape(operand, transposed, k)
    stride = cols * elem

    def read16(addr: int):
        r, byte = divmod(addr, stride)
        assert 0 <= r < rows and byte + 2 <= stride
        return (r, byte // 2) if elem == 2 else ((r, byte), (r, byte + 1))

    lanes = []
    for lane in range(32):
        r, c = get_ldmatrix_offset(operand, lane, 0, cols, dtype, transposed)
        lanes.append(r * stride + c * elem)
    trans = transposed if operand == "A" else not transposed
    regs = isa.ldmatrix_simulate(read16, lanes, 4, trans=trans)

    per_lane = 4 * 4 // elem  # four 32-bit registers
    per_instruction = per_lane if operand == "A" else per_lane // 2
    for lane, e in itertools.product(range(32), range(per_lane)):
        reg, byte = divmod(e * elem, 4)
        half = regs[lane][reg][byte // 2]
        stored = half if elem == 2 else half[byte % 2]
        got = _logical(transposed, *stored)
        if operand == "A":
            table = isa.mma_m16n8k16_f16_a if elem == 2 else isa.mma_m16n8k32_s8_a
            want = table(lane, e)
        else:
            table = isa.mma_m16n8k16_f16_b if elem == 2 else isa.mma_m16n8k32_s8_b
            kk, n = table(lane, e % per_instruction)
            want = (kk, n + 8 * (e // per_instruction))
        assert got == want, (lane, e)


def test_element_maps_are_the_ptx_tables():
    from tile.lang._src.mma_layouts import mma_a_element, mma_b_element

    for lane in range(32):
        for e in range(8):
            assert mma_a_element(lane, e, 16) == isa.mma_m16n8k16_f16_a(lane, e)
            m, n = isa.mma_m16n8_c(lane, e % 4)
            assert mma_store_index_map(lane, e) == (m, n + 8 * (e // 4))
        for e in range(16):
            assert mma_a_element(lane, e, 32) == isa.mma_m16n8k32_s8_a(lane, e)
        for e in range(4):
            assert mma_b_element(lane, e, 16) == isa.mma_m16n8k16_f16_b(lane, e)
        for e in range(8):
            assert mma_b_element(lane, e, 32) == isa.mma_m16n8k32_s8_b(lane, e)


@pytest.mark.parametrize("dtype, row_size", [("float16", 16), ("float16", 32), ("float16", 64), ("int8", 64),
                                             ("int8", 128)])  # fmt: skip
def test_swizzle_is_a_bijection_with_conflict_free_ldmatrix_matrices(dtype, row_size):
    elem = 2 if dtype == "float16" else 1
    rows, per_chunk = 32, 16 // elem
    span_elems = min(128, row_size * elem) // elem
    spans = row_size // span_elems
    placed = {}
    for r, c in itertools.product(range(rows), range(row_size)):
        span, row, col = get_swizzle_layout(r, c, row_size, dtype)
        assert 0 <= span < spans and row == r and 0 <= col < span_elems
        placed[(span, row, col)] = (r, c)
        if c % per_chunk == 0:  # a chunk stays whole: 16 bytes, one ldmatrix row
            assert col % per_chunk == 0
    assert len(placed) == rows * row_size

    def address(r: int, c: int) -> int:
        span, row, col = get_swizzle_layout(r, c, row_size, dtype)
        return ((span * rows + row) * span_elems + col) * elem

    for top, c in itertools.product(range(0, rows, 8), range(0, row_size, per_chunk)):
        assert isa.ldmatrix_matrix_conflict_free([address(top + i, c) for i in range(8)]), (top, c)


# ----------------------------------------------------------------------------- GEMMs on the emulator
def _swizzled(buffer):
    """TileLang's example's swizzle where the rows fill whole spans, else row-major."""
    shape = buffer.shape
    row_bytes = int(shape[-1]) * (1 if buffer.dtype == "int8" else 2)
    if row_bytes not in (32, 64) and row_bytes % 128:
        return T.Layout(shape, lambda i, j: [i, j])
    return T.Layout(shape, lambda i, j: list(get_swizzle_layout(i, j, shape[-1], buffer.dtype)))


@functools.cache
def _intrinsics_gemm(M, N, K, in_dtype, accum, a_t, b_t, warp_col_tiles=32):
    """A (M x K, stored transposed when a_t) times B (K x N, stored N-major when b_t), 2 x 2 warps."""
    mma = TensorCoreIntrinEmitter(
        in_dtype, in_dtype, accum, a_transposed=a_t, b_transposed=b_t, block_row_warps=2,
        block_col_warps=2, warp_row_tiles=32, warp_col_tiles=warp_col_tiles,
        chunk=64 if in_dtype == "int8" else 32,
    )  # fmt: skip
    bM, bN, bK = 64, 2 * warp_col_tiles, mma.chunk
    swizzle = in_dtype != "int8"

    def corner(k, mn, k_first):
        """The tile's first element in a matrix stored K-major (``k_first``) or not."""
        return (k, mn) if k_first else (mn, k)

    @T.prim_func
    def gemm(
        A: T.Tensor((K, M) if a_t else (M, K), in_dtype),
        Bt: T.Tensor((N, K) if b_t else (K, N), in_dtype),
        C: T.Tensor((M, N), accum),
    ):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bK, bM) if a_t else (bM, bK), in_dtype)
            B_shared = T.alloc_shared((bN, bK) if b_t else (bK, bN), in_dtype)
            C_shared = T.alloc_shared((bM // 16, bN // mma.n_dim, 16, mma.n_dim), accum)
            A_local = T.alloc_local((mma.warp_rows * mma.local_size_a,), in_dtype)
            B_local = T.alloc_local((mma.warp_cols * mma.local_size_b,), in_dtype)
            C_local = T.alloc_local((mma.warp_rows * mma.warp_cols * mma.local_size_out,), accum)
            if swizzle:
                T.annotate_layout({A_shared: _swizzled(A_shared), B_shared: _swizzled(B_shared)})
            T.clear(C_local)
            for ko in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[corner(ko * bK, by * bM, a_t)], A_shared)
                T.copy(Bt[corner(ko * bK, bx * bN, not b_t)], B_shared)
                for ki in T.serial(bK // mma.micro_size_k):
                    mma.ldmatrix_a(A_local, A_shared, ki)
                    mma.ldmatrix_b(B_local, B_shared, ki)
                    mma.mma(A_local, B_local, C_local)
            mma.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(bM, bN):
                C[by * bM + i, bx * bN + j] = C_shared[i // 16, j // mma.n_dim, i % 16, j % mma.n_dim]

    return gemm


def _operands(in_dtype, M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    if in_dtype == "int8":
        a, b = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
        return a.astype("int8"), b.astype("int8"), a @ b
    dtype = ml_dtypes.bfloat16 if in_dtype == "bfloat16" else in_dtype
    a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    return a, b, a.astype("float64") @ b.astype("float64")


@needs_backend("cuda")
@pytest.mark.parametrize(
    "in_dtype, accum, a_t, b_t, warp_col_tiles",
    [("float16", "float32", False, True, 32),   # TileLang's example: ldmatrix, swizzled tiles
     ("float16", "float32", True, False, 24),   # both .trans, n8 pieces (x2 loads of B)
     ("int8", "int32", False, True, 32),        # ldmatrix of bytes, K contiguous
     ("int8", "int32", True, False, 32),        # element loads: bytes cannot be transposed
     ("bfloat16", "float32", False, True, 32)],
)  # fmt: skip
def test_intrinsics_gemm_matches_numpy_on_the_emulator(
    monkeypatch, in_dtype, accum, a_t, b_t, warp_col_tiles
):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    M, N, K = 64, 4 * warp_col_tiles, 128
    kernel = tilelang.compile(
        _intrinsics_gemm(M, N, K, in_dtype, accum, a_t, b_t, warp_col_tiles), out_idx=[2], target=SM80
    )
    if in_dtype != "int8":  # the hand-built swizzle is applied: ldmatrix rows are XOR-permuted
        source = kernel.get_kernel_source()
        assert any("tile_ldmatrix" in line and "^" in line for line in source.splitlines())
    a, b, want = _operands(in_dtype, M, N, K)
    got = kernel(np.ascontiguousarray(a.T) if a_t else a, np.ascontiguousarray(b.T) if b_t else b)
    if in_dtype == "int8":
        np.testing.assert_array_equal(np.asarray(got), want)
    else:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)


@needs_nvcc
@needs_cuobjdump
@needs_backend("cuda")
@pytest.mark.parametrize("in_dtype, accum, mma_sass", [("float16", "float32", "HMMA.16816.F32"),
                                                       ("bfloat16", "float32", "HMMA.16816.F32.BF16"),
                                                       ("int8", "int32", "IMMA.16832.S8.S8")])  # fmt: skip
def test_intrinsics_gemm_is_ldsm_and_tensor_cores_under_nvcc(in_dtype, accum, mma_sass):
    kernel = tilelang.compile(_intrinsics_gemm(64, 128, 128, in_dtype, accum, False, True), target=SM80)
    sass = kernel.get_kernel_source("sass")
    assert mma_sass in sass and "LDSM.16.M88.4" in sass
    assert kernel.artifact.payload.stats.stack_bytes == 0  # the register arrays stay registers


# ----------------------------------------------------------------------------- refusals and errors
def _one_mma():
    @T.prim_func
    def one_mma(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((16, 16), "float16")
            a = T.alloc_local((8,), "float16")
            b = T.alloc_local((4,), "float16")
            c = T.alloc_local((4,), "float32")
            tx = T.get_thread_binding()
            T.copy(A, S)
            T.clear(c)
            T.ptx_ldmatrix(False, 4, T.access_ptr(S[tx % 16, tx // 16 * 8], "r"), T.access_ptr(a[0], "w"))
            T.ptx_ldmatrix("float16", False, 2, ".b16", b.data, 0, S.data, tx % 8 * 16 + tx // 8 % 2 * 8)
            T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32",
                      a.data, 0, b.data, 0, c.data, 0, T.bool(False))  # fmt: skip
            for i in T.serial(4):
                C[tx // 4 + i // 2 * 8, tx % 4 * 2 + i % 2] = c[i]

    return one_mma


@needs_backend("cuda")
def test_ptx_ldmatrix_and_ptx_mma_by_hand_on_the_emulator(monkeypatch):
    # TileLang's two ldmatrix spellings: access pointers (A = S, 4 matrices) and TVM's data +
    # element offsets (B stored [N][K] = S's first 8 rows, 2 matrices: k 0-7 and k 8-15)
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(3).standard_normal((16, 16)).astype("float16")
    got = tilelang.compile(_one_mma(), out_idx=[1], target=SM80)(a)
    want = a.astype("float64") @ a[:8].astype("float64").T
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("target", [None, {"kind": "hip", "arch": "gfx90a"}])
def test_targets_without_warp_mma_refuse_at_the_users_line(target):
    with pytest.raises(UnsupportedOnTargetError, match="warp matrix instructions") as info:
        tilelang.compile(_one_mma(), out_idx=[1], target=target or "cpu")
    assert info.value.location is not None and "T.ptx_ldmatrix(False" in info.value.location.source_line


def _mma_with(operand: str, shape: str, ptx_type: str):
    """A kernel issuing one T.ptx_mma of ``shape`` on ``ptx_type`` over an ``operand`` array."""

    @T.prim_func
    def one(C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            a = T.alloc_local((16,), operand)
            c = T.alloc_local((4,), "float32")
            T.ptx_mma("float32", shape, "row", "col", ptx_type, ptx_type, "fp32",
                      a.data, 0, a.data, 0, c.data, 0, False)  # fmt: skip

    return one


@pytest.mark.parametrize(
    "operand, shape, ptx_type, message",
    [("float8_e4m3fn", "m16n8k32", "e4m3", "not a form tile issues"),
     ("float32", "m16n8k16", "fp16", "holds float32, the instruction reads float16")],
)  # fmt: skip
def test_ptx_mma_checks_its_form_and_buffers(operand, shape, ptx_type, message):
    with pytest.raises(TileTypeError, match=message):
        _mma_with(operand, shape, ptx_type)


def test_ptx_ldmatrix_loads_one_two_or_four_matrices():
    with pytest.raises(TileTypeError, match="loads 1, 2 or 4 matrices"):

        @T.prim_func
        def three_matrices(C: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                S, a = T.alloc_shared((16, 16), "float16"), T.alloc_local((8,), "float16")
                T.ptx_ldmatrix(False, 3, T.access_ptr(S[0, 0]), T.access_ptr(a[0]))


def test_emitter_refuses_forms_it_has_no_instruction_for():
    with pytest.raises(TileTypeError, match="float16 x float16 -> int32"):
        TensorCoreIntrinEmitter("float16", "float16", "int32")
    with pytest.raises(TileTypeError, match="multiple of 16"):
        TensorCoreIntrinEmitter("float16", "float16", "float32", warp_row_tiles=8)
    mma = TensorCoreIntrinEmitter("int8", "int8", "int32", warp_row_tiles=64, warp_col_tiles=64, chunk=32)
    assert (mma.micro_size_x, mma.micro_size_y, mma.micro_size_k, mma.mma_prefix) == (16, 16, 32, "m16n8k32")
    assert (mma.warp_rows, mma.warp_cols, mma.local_size_a, mma.local_size_b, mma.local_size_out) == (
        4, 4, 16, 16, 8)  # fmt: skip


@needs_backend("cuda")
def test_clear_fills_every_element_of_a_per_thread_array(monkeypatch):
    # T.alloc_local is per thread: T.fill/T.clear set all of each thread's elements (they used
    # to split them over the block's threads like a fragment's, leaving most unset on GPUs)
    @T.prim_func
    def filled(Out: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=4):
            acc = T.alloc_local((8,), "float32")
            T.fill(acc, 2.0)
            tx = T.get_thread_binding()
            for i in T.serial(8):
                Out[tx, i] = acc[i] + tx

    monkeypatch.setenv("TILE_DEVICE", "emu")
    got = tilelang.compile(filled, out_idx=[0], target=SM80)()
    np.testing.assert_array_equal(np.asarray(got), 2.0 + np.arange(4, dtype="float32")[:, None].repeat(8, 1))


def test_a_hand_built_swizzle_is_recorded_as_the_hardware_swizzle():
    # TileLang's examples build their swizzle as a plain T.Layout from get_swizzle_layout; stored
    # element for element like tile's 64-byte swizzle, it becomes that swizzle (which the GPU
    # backends apply to shared memory); a layout no swizzle matches stays as written
    from tile.ir.annotations import ANNOTATED_LAYOUTS
    from tile.ir.ops.layout_rules import decode_layout
    from tile.layout.swizzle import SwizzledLayout

    @T.prim_func
    def annotated(A: T.Tensor((64, 32), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 32), "float16")
            R = T.alloc_shared((64, 32), "float16")
            T.annotate_layout({S: _swizzled(S), R: T.Layout((64, 32), lambda i, j: [i, (j + 8) % 32])})
            T.copy(A, S)
            T.copy(S, R)

    layouts = {name: decode_layout(text) for name, text in annotated.attrs[ANNOTATED_LAYOUTS].items()}
    assert isinstance(layouts["S"], SwizzledLayout) and layouts["S"].swizzle_bytes == 64
    assert not isinstance(layouts["R"], SwizzledLayout)
