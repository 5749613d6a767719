"""T.gemm: transposes, operand scopes (shared/fragment A and B), dtypes and clear_accum, vs numpy."""

import itertools

import ml_dtypes
import numpy as np
import pytest
from _lang_kernels import EMU_TARGETS

import tile.lang as tilelang
import tile.lang.language as T

ACCUM = {"float32": "float32", "float16": "float32", "bfloat16": "float32", "int8": "int32"}


def gemm_kernel(M, N, K, bm, bn, bk, trans_a, trans_b, scopes, dtype, clear_first):
    """A blocked GEMM whose A/B tiles live in ``scopes`` ("ss", "rs", "sr", "rr")."""
    accum = ACCUM[dtype]
    a_shape, b_shape = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    a_tile, b_tile = ((bk, bm) if trans_a else (bm, bk)), ((bn, bk) if trans_b else (bk, bn))
    alloc_a = T.alloc_shared if scopes[0] == "s" else T.alloc_fragment
    alloc_b = T.alloc_shared if scopes[1] == "s" else T.alloc_fragment

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_tile = alloc_a(a_tile, dtype)
            B_tile = alloc_b(b_tile, dtype)
            C_local = T.alloc_fragment((bm, bn), accum)
            if clear_first:
                T.fill(C_local, 77)  # the first gemm's clear_accum must discard this
            else:
                T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                if trans_a:
                    T.copy(A[k * bk, by * bm], A_tile)
                else:
                    T.copy(A[by * bm, k * bk], A_tile)
                if trans_b:
                    T.copy(B[bx * bn, k * bk], B_tile)
                else:
                    T.copy(B[k * bk, bx * bn], B_tile)
                if clear_first and k == 0:
                    T.gemm(
                        A_tile, B_tile, C_local, transpose_A=trans_a, transpose_B=trans_b, clear_accum=True
                    )
                else:
                    T.gemm(A_tile, B_tile, C_local, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(C_local, C[by * bm, bx * bn])

    return main


def operands(M, N, K, trans_a, trans_b, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "int8":
        a = rng.integers(-128, 128, size=(M, K)).astype("int8")
        b = rng.integers(-128, 128, size=(K, N)).astype("int8")
        ref = a.astype("int64") @ b.astype("int64")
    else:
        np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
        a = rng.standard_normal((M, K)).astype(np_dtype)
        b = rng.standard_normal((K, N)).astype(np_dtype)
        ref = a.astype("float64") @ b.astype("float64")
    a_in = np.ascontiguousarray(a.T) if trans_a else a
    b_in = np.ascontiguousarray(b.T) if trans_b else b
    return a_in, b_in, ref


def run(kernel, a, b, dtype):
    """Call the kernel; bfloat16 operands go in as torch tensors (numpy cannot export them via DLPack)."""
    if dtype != "bfloat16":
        return kernel(a, b)
    torch = pytest.importorskip("torch")
    as_torch = [torch.from_numpy(x.astype("float32")).to(torch.bfloat16) for x in (a, b)]
    return kernel(*as_torch).numpy()


def check(c, ref, dtype):
    if dtype == "int8":
        np.testing.assert_array_equal(c, ref.astype("int32"))  # int8 x int8 sums are exact in int32
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)  # exact products, fp32 sums


TRANSPOSES = list(itertools.product([False, True], repeat=2))
SCOPES = ["ss", "rs", "sr", "rr"]
DTYPES = ["float32", "float16", "bfloat16", "int8"]


@pytest.mark.parametrize("scopes", SCOPES)
@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
def test_gemm_transposes_by_operand_scopes(trans_a, trans_b, scopes):
    # every (transpose, scope) pair, cycling the dtype so each dtype meets each scope
    dtype = DTYPES[(SCOPES.index(scopes) + TRANSPOSES.index((trans_a, trans_b))) % len(DTYPES)]
    M, N, K = 37, 29, 45  # no size is a multiple of its tile: tail tiles on every axis
    func = gemm_kernel(M, N, K, 16, 16, 16, trans_a, trans_b, scopes, dtype, clear_first=False)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    a, b, ref = operands(M, N, K, trans_a, trans_b, dtype, seed=M + N)
    check(run(kernel, a, b, dtype), ref, dtype)


@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
def test_gemm_clear_accum_with_every_transpose(trans_a, trans_b):
    M, N, K = 45, 37, 50
    func = gemm_kernel(M, N, K, 16, 16, 16, trans_a, trans_b, "ss", "float32", clear_first=True)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    a, b, ref = operands(M, N, K, trans_a, trans_b, "float32", seed=0)
    check(kernel(a, b), ref, "float32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_clear_accum_discards_previous_values(dtype):
    M, N, K = 32, 48, 64
    func = gemm_kernel(M, N, K, 16, 16, 16, False, True, "rs", dtype, clear_first=True)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    a, b, ref = operands(M, N, K, False, True, dtype, seed=3)
    check(run(kernel, a, b, dtype), ref, dtype)


def test_gemm_on_slices_of_larger_tiles():
    """Operands may be slices: a K-half of a shared tile times a K-half of a fragment."""
    M, N, K = 16, 16, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((M, K), "float32")
            B_f = T.alloc_fragment((K, N), "float32")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_f)
            T.gemm(A_s[0:M, 0:16], B_f[0:16, 0:N], C_f, clear_accum=True)
            T.gemm(A_s[0:M, 16:32], B_f[16:32, 0:N], C_f)
            T.copy(C_f, C)

    kernel = tilelang.compile(main, out_idx=[-1], target="cpu")
    a, b, ref = operands(M, N, K, False, False, "float32", seed=4)
    check(kernel(a, b), ref, "float32")


def test_positional_options_follow_tilelang_order():
    # TileLang's T.gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, ...): a
    # program passing clear_accum positionally after a Square policy (0) must clear C
    # before each product, so C holds the last K block's product only
    @T.prim_func
    def main(
        A: T.Tensor((32, 64), "float32"), B: T.Tensor((64, 32), "float32"), C: T.Tensor((32, 32), "float32")
    ):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((32, 32), "float32")
            B_s = T.alloc_shared((32, 32), "float32")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for k in T.serial(2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l, False, False, T.GemmWarpPolicy.Square, True)
            T.copy(C_l, C)

    kernel = tilelang.compile(main, out_idx=[-1])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a[:, 32:] @ b[32:, :], rtol=1e-4, atol=1e-4)


def run_time_clear_kernel(loop):
    """clear_accum=(k == 0): a flag the loop variable decides (TileLang's flashmla example)."""
    M, N, K, bk = 64, 64, 64, 16

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            T.fill(C_l, 77)  # the k == 0 gemm must discard this
            for k in loop(K // bk):
                T.copy(A[0, k * bk], A_s)
                T.copy(B[k * bk, 0], B_s)
                T.gemm(A_s, B_s, C_l, clear_accum=(k == 0))
            T.copy(C_l, C)

    return main


@pytest.mark.parametrize("loop", ["serial", "unroll"])
@pytest.mark.parametrize("target", EMU_TARGETS)
def test_gemm_clear_accum_decided_by_the_loop_variable(loop, target, monkeypatch):
    # before: TileParseError "Cannot use and / or / not operator to Expr" at the T.gemm line
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(run_time_clear_kernel(getattr(T, loop)), out_idx=[-1], target=target)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 64)).astype("float16")
    b = rng.standard_normal((64, 64)).astype("float16")
    np.testing.assert_allclose(kernel(a, b), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-2)
