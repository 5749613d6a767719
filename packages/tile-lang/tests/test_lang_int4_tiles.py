"""Tiles of 4-bit elements (``T.alloc_shared(shape, T.int4)``) and ``T.gemm`` on them.

TileLang's examples/gemm_int4 copies packed ``T.int4`` tensors into int4 shared tiles and
multiplies them with ``T.gemm(..., transpose_B=True)``; tile refused a tile of 4-bit elements.
``tile.ir.transform.pack_subbyte_tiles`` now holds such a tile as its bytes (two elements per
byte, the even one in the low nibble, as the packed tensors): copies move bytes, a fill writes
the code in both nibbles, an element read decodes its nibble, and ``T.gemm`` decodes both
operands into 8-bit tiles and multiplies those.

References: numpy on the unpacked values (exact integer products); the bytes of the packed
tensors; the e2m1 value table of the OCP MX specification (0, 0.5, 1, 1.5, 2, 3, 4, 6).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TileShapeError, TileTypeError
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]


@pytest.fixture(autouse=True)
def _emulated(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")


def pack(values: np.ndarray) -> np.ndarray:
    """4-bit codes (the low four bits of each value), two per byte along the last dim, the even
    element in the low nibble (TileLang's pack_int4)."""
    codes = values.astype(np.int64) & 15
    return (codes[..., ::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def gemm_nt(M, N, K, dtype, block=(32, 32, 64), threads=128):
    bm, bn, bk = block

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), dtype)
            B_shared = T.alloc_shared((bn, bk), dtype)
            C_local = T.alloc_fragment((bm, bn), T.int32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_shared)
                T.copy(B[bx * bn, ko * bk], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_gemm_of_4bit_tiles_matches_numpy(target, dtype) -> None:
    M, N, K = 64, 64, 192
    rng = np.random.default_rng(0)
    low, high = (-8, 8) if dtype == "int4" else (0, 16)
    a = rng.integers(low, high, (M, K))
    b = rng.integers(low, high, (N, K))
    kernel = tilelang.compile(gemm_nt(M, N, K, dtype), out_idx=-1, target=target)
    c = np.asarray(kernel(pack(a), pack(b)))
    np.testing.assert_array_equal(c, a @ b.T)


def test_tileLang_example_shape_with_a_partial_block() -> None:
    # examples/gemm_int4's program at a size whose last M block is partial (tails in bytes)
    M, N, K = 80, 64, 128
    rng = np.random.default_rng(1)
    a, b = rng.integers(-8, 8, (M, K)), rng.integers(-8, 8, (N, K))
    kernel = tilelang.compile(gemm_nt(M, N, K, "int4", (64, 64, 64)), out_idx=-1, target="cpu")
    np.testing.assert_array_equal(np.asarray(kernel(pack(a), pack(b))), a @ b.T)


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def decode_kernel(M, K, dtype, out_dtype):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), Y: T.Tensor((M, K), out_dtype)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((M, K), dtype)
            T.copy(A, S)
            for i, k in T.Parallel(M, K):
                Y[i, k] = T.cast(S[i, k], out_dtype)

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("dtype", "out_dtype"), [("int4", "int32"), ("uint4", "int32"), ("float4_e2m1fn", "float32")]
)
def test_element_reads_decode_their_nibble(target, dtype, out_dtype) -> None:
    M, K = 16, 32
    codes = np.random.default_rng(2).integers(0, 16, (M, K))
    if dtype == "int4":
        want = np.where(codes >= 8, codes - 16, codes)
    elif dtype == "uint4":
        want = codes
    else:
        want = np.where(codes & 8, -1.0, 1.0) * E2M1[codes & 7]
    kernel = tilelang.compile(decode_kernel(M, K, dtype, out_dtype), out_idx=-1, target=target)
    np.testing.assert_array_equal(np.asarray(kernel(pack(codes))), want)


def round_trip_kernel(M, K, value):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), Y: T.Tensor((M, K), T.int4), F: T.Tensor((M, K), T.int4)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((M, K), T.int4)
            R = T.alloc_fragment((M, K), T.int4)
            T.copy(A, S)
            T.copy(S, R)
            T.copy(R, Y)
            T.fill(S, value)
            T.copy(S, F)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_copies_move_bytes_and_a_fill_writes_both_nibbles(target) -> None:
    M, K = 8, 64
    codes = np.random.default_rng(3).integers(0, 16, (M, K))
    kernel = tilelang.compile(round_trip_kernel(M, K, -3), out_idx=[1, 2], target=target)
    y, f = (np.asarray(x).view(np.uint8) for x in kernel(pack(codes)))
    np.testing.assert_array_equal(y, pack(codes))  # shared -> fragment -> global: the same bytes
    assert (f == 0xDD).all()  # -3 is code 0b1101 in both nibbles


# ------------------------------------------------------------------------------------- errors
def test_a_copy_from_an_odd_column_is_refused_at_its_line() -> None:
    @T.prim_func
    def main(A: T.Tensor((8, 64), T.int4), Y: T.Tensor((8, 32), T.int32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 32), T.int4)
            T.copy(A[0, 1], S)
            for i, k in T.Parallel(8, 32):
                Y[i, k] = T.cast(S[i, k], "int32")

    with pytest.raises(TileShapeError, match=r"column 1.*both must be even") as info:
        tilelang.compile(main, target="cpu")
    assert "T.copy(A[0, 1], S)" in str(info.value)


def test_an_element_store_into_a_4bit_tile_is_refused() -> None:
    @T.prim_func
    def main(Y: T.Tensor((8, 32), T.int4)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 32), T.int4)
            for i, k in T.Parallel(8, 32):
                S[i, k] = T.cast(i, "int4")
            T.copy(S, Y)

    with pytest.raises(TileTypeError, match="two elements share a byte") as info:
        tilelang.compile(main, target="cpu")
    assert "S[i, k] =" in str(info.value)


def test_other_operators_on_a_4bit_tile_are_refused() -> None:
    @T.prim_func
    def main(A: T.Tensor((8, 32), T.int4), Y: T.Tensor((8,), T.int4)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 32), T.int4)
            R = T.alloc_fragment((8,), T.int4)
            T.copy(A, S)
            T.reduce_sum(S, R, dim=1)
            T.copy(R, Y)

    with pytest.raises(TileTypeError, match=r"takes T\.copy, T\.fill/T\.clear, T\.gemm and element reads"):
        tilelang.compile(main, target="cpu")


def test_a_gemm_of_fp4_tiles_is_refused_with_a_hint() -> None:
    with pytest.raises(TileTypeError, match="multiplies 4-bit tiles of int4 and uint4 only") as info:
        tilelang.compile(gemm_nt(32, 32, 64, "float4_e2m1fn"), target="cpu")
    assert "float16" in info.value.hint


def test_an_odd_last_dim_is_refused() -> None:
    @T.prim_func
    def main(Y: T.Tensor((8, 34), T.int4)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 33), T.int4)
            T.clear(S)
            T.copy(S, Y[0:8, 0:33])

    with pytest.raises(TileShapeError, match="must be a constant even number"):
        tilelang.compile(main, target="cpu")


def test_symbolic_4bit_tensors_on_the_cpu_are_refused_with_a_hint() -> None:
    # the CPU entry binds no dim of a 4-bit tensor; GPU targets take them (below)
    K = T.dynamic("K")

    @T.prim_func
    def main(A: T.Tensor((8, K), T.int4), Y: T.Tensor((8, 32), T.int32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 32), T.int4)
            T.copy(A[0, 0], S)
            for i, k in T.Parallel(8, 32):
                Y[i, k] = T.cast(S[i, k], "int32")

    from tile.ir.errors import UnsupportedOnTargetError

    with pytest.raises(UnsupportedOnTargetError, match="symbolic dims") as info:
        tilelang.compile(main, target="cpu")
    assert "uint8" in info.value.hint


@pytest.mark.parametrize(
    "target",
    [
        pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
        pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    ],
)
def test_symbolic_dims_on_gpu_targets(target) -> None:
    M, K = T.dynamic("M"), T.dynamic("K")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((32, K), T.int4), C: T.Tensor((M, 32), T.int32)):
        with T.Kernel(1, T.ceildiv(M, 32), threads=128) as (_, by):
            A_shared = T.alloc_shared((32, 64), T.int4)
            B_shared = T.alloc_shared((32, 64), T.int4)
            C_local = T.alloc_fragment((32, 32), T.int32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * 32, ko * 64], A_shared)
                T.copy(B[0, ko * 64], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * 32, 0])

    kernel = tilelang.compile(main, out_idx=-1, target=target)
    rng = np.random.default_rng(4)
    for m, k in [(32, 64), (50, 192)]:
        a, b = rng.integers(-8, 8, (m, k)), rng.integers(-8, 8, (32, k))
        np.testing.assert_array_equal(np.asarray(kernel(pack(a), pack(b))), a @ b.T)


def test_a_tile_with_no_4bit_tensor_in_the_kernel() -> None:
    # no byte view to declare: the kernel keeps its own statements
    @T.prim_func
    def main(Y: T.Tensor((4, 16), T.int32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4, 16), T.int4)
            T.fill(S, 5)
            for i, k in T.Parallel(4, 16):
                Y[i, k] = T.cast(S[i, k], "int32") * (k + 1)

    y = np.asarray(tilelang.compile(main, out_idx=-1, target="cpu")())
    np.testing.assert_array_equal(y, np.tile(5 * np.arange(1, 17), (4, 1)))


def test_a_strided_packed_tensor_on_the_cpu_is_a_typed_error() -> None:
    from tile.lang.errors import KernelArgumentError

    kernel = tilelang.compile(decode_kernel(16, 32, "int4", "int32"), out_idx=-1, target="cpu")
    wide = pack(np.zeros((16, 64), np.int64))  # (16, 32) bytes
    with pytest.raises(KernelArgumentError, match="not contiguous"):
        kernel(wide[:, ::2])  # (16, 16) bytes, every other one
