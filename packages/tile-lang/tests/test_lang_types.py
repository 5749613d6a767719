"""Storage types: fp8 through T.copy/T.Parallel casts, bfloat16 numpy arrays, int4/fp4 bit unpacking."""

import sys

import ml_dtypes
import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T

FP8 = ("float8_e4m3fn", "float8_e5m2")


def fp8_round_trip(dtype, rows=2, cols=128):
    @T.prim_func
    def kernel(
        A: T.Tensor((rows, cols), dtype),
        B: T.Tensor((rows, cols), "float32"),
        C: T.Tensor((rows, cols), dtype),
    ):
        with T.Kernel(1, threads=32):
            staged = T.alloc_shared((rows, cols), dtype)
            wide = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, staged)
            T.copy(staged, wide)  # fp8 -> float32 through a casting copy
            T.copy(wide, B)
            for i, j in T.Parallel(rows, cols):
                C[i, j] = T.cast(wide[i, j] * 2.0, dtype)  # float32 -> fp8

    return kernel


def _fp8_inputs(dtype, subnormal):
    np_dtype = getattr(ml_dtypes, dtype)
    tiny = float(ml_dtypes.finfo(np_dtype).smallest_normal)
    values = np.random.default_rng(7).standard_normal((2, 128)) * 4
    # subnormal: scaled below the smallest normal number; else pushed above it
    values = values * tiny / 8 if subnormal else np.where(np.abs(values) < 2 * tiny, 2 * tiny, values)
    return values.astype(np_dtype)


def _run_fp8(dtype, subnormal, cols=128):
    kernel = tilelang.compile(fp8_round_trip(dtype, cols=cols), out_idx=[1, 2], target="cpu")
    np_dtype = getattr(ml_dtypes, dtype)
    a = np.ascontiguousarray(_fp8_inputs(dtype, subnormal)[:, :cols])
    b, c = kernel(a)
    np.testing.assert_array_equal(b, a.astype("float32"))
    assert c.dtype == np.dtype(np_dtype)
    expected = (a.astype("float32") * 2.0).astype(np_dtype)
    np.testing.assert_array_equal(c.astype("float32"), expected.astype("float32"))


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_storage_casts_match_ml_dtypes(dtype):
    _run_fp8(dtype, subnormal=False)


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_subnormals(dtype):
    _run_fp8(dtype, subnormal=True)


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_casts_in_vectorized_loops(dtype):
    # 32 columns: the T.Parallel inner loops become vector loops on the CPU
    _run_fp8(dtype, subnormal=False, cols=32)
    _run_fp8(dtype, subnormal=True, cols=32)


def fp8_copy_round_trip(dtype):
    @T.prim_func
    def kernel(A: T.Tensor((2, 128), dtype), B: T.Tensor((2, 128), dtype)):
        with T.Kernel(1, threads=32):
            wide = T.alloc_fragment((2, 128), "float32")
            T.copy(A, wide)  # fp8 -> float32
            T.copy(wide, B)  # float32 -> fp8

    return kernel


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_copy_round_trip_through_float32_fragment(dtype):
    kernel = tilelang.compile(fp8_copy_round_trip(dtype), out_idx=[1], target="cpu")
    codes = np.arange(256, dtype=np.uint8).reshape(2, 128)
    out = kernel(codes.view(getattr(ml_dtypes, dtype)))
    values = codes.view(getattr(ml_dtypes, dtype)).astype(np.float32)
    nan = np.isnan(values)
    # every finite code comes back, -0 too; e5m2's infinities saturate to +-57344 on the way back
    # into fp8 (0x7b, 0xfb: cvt.rn.satfinite, as on a GPU)
    want = np.where(np.isinf(values), codes - 1, codes)
    np.testing.assert_array_equal(out.view(np.uint8)[~nan], want[~nan])
    assert np.isnan(out.astype(np.float32)[nan]).all()


def fp8_fill(dtype, value):
    @T.prim_func
    def kernel(C: T.Tensor((4, 16), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((4, 16), dtype)
            T.fill(tile, value)
            T.copy(tile, C)

    return kernel


@pytest.mark.parametrize("value", [1.5, -448.0, 2.0**-8, 0.3])
@pytest.mark.parametrize("dtype", FP8)
def test_fp8_fill_with_a_constant(dtype, value):
    out = tilelang.compile(fp8_fill(dtype, value), out_idx=[0], target="cpu")()
    expected = np.full((4, 16), value, np.float32).astype(getattr(ml_dtypes, dtype))
    if not isinstance(out, np.ndarray):  # no array argument: a torch tensor, as TileLang returns
        out = out.view(sys.modules["torch"].uint8).numpy()
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


def fp8_scaled_sum(n, a_dtype, b_dtype):
    @T.prim_func
    def kernel(
        A: T.Tensor((4, n), a_dtype),
        B: T.Tensor((4, n), b_dtype),
        Y: T.Tensor((4, n), "float32"),
        Z: T.Tensor((4, n), a_dtype),
    ):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, n):
                # no local `x = ...`: a scalar binding inside a vectorized loop is miscompiled
                # by TVM's FlattenBuffer + VectorizeLoop (all lanes get lane 0), fp8 or not
                Y[i, j] = T.cast(A[i, j], "float32") * 0.75 + T.cast(B[i, j], "float32")
                Z[i, j] = T.cast(T.cast(A[i, j], "float32") * 0.75 + T.cast(B[i, j], "float32"), a_dtype)

    return kernel


@pytest.mark.parametrize("n", [16, 100])
def test_fp8_parallel_compute_matches_numpy(n):
    a_dtype, b_dtype = FP8
    kernel = tilelang.compile(fp8_scaled_sum(n, a_dtype, b_dtype), out_idx=[2, 3], target="cpu")
    rng = np.random.default_rng(n)
    a = (rng.standard_normal((4, n)) * 8).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((4, n)) * 8).astype(ml_dtypes.float8_e5m2)
    y, z = kernel(a, b)
    expected = a.astype(np.float32) * np.float32(0.75) + b.astype(np.float32)
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(z.view(np.uint8), expected.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_bfloat16_numpy_arrays_in_and_out():
    @T.prim_func
    def widen(A: T.Tensor((64,), "bfloat16"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "bfloat16")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(64):
                B[i] = T.cast(A[i], "float32")
                C[i] = A[i]

    kernel = tilelang.compile(widen, out_idx=[1, 2], target="cpu")
    a = np.linspace(-3, 3, 64).astype(ml_dtypes.bfloat16)
    b, c = kernel(a)
    np.testing.assert_array_equal(b, a.astype("float32"))
    np.testing.assert_array_equal(c.view(np.uint16), a.view(np.uint16))


def unpack_kernel(n):
    @T.prim_func
    def unpack(
        P: T.Tensor((n,), "uint8"), I4: T.Tensor((2 * n,), "int32"), F4: T.Tensor((2 * n,), "float32")
    ):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(2 * n):
                nibble = (P[i // 2] >> T.cast((i % 2) * 4, "uint8")) & T.uint8(0xF)
                # signed int4: two's complement in 4 bits
                I4[i] = T.cast(nibble, "int32") - T.cast(nibble >> T.uint8(3), "int32") * 16
                # fp4 e2m1: s eee? -> sign bit 3, exponent bits 2..1, mantissa bit 0
                sign = T.cast(nibble >> T.uint8(3), "float32")
                exp = T.cast((nibble >> T.uint8(1)) & T.uint8(3), "int32")
                man = T.cast(nibble & T.uint8(1), "float32")
                magnitude = T.if_then_else(
                    exp == 0, man * 0.5, (1.0 + man * 0.5) * T.cast(T.shift_left(1, exp - 1), "float32")
                )
                F4[i] = magnitude * (1.0 - 2.0 * sign)

    return unpack


def test_uint8_bit_manipulation_unpacks_int4_and_fp4():
    n = 40
    kernel = tilelang.compile(unpack_kernel(n), out_idx=[1, 2], target="cpu")
    packed = np.random.default_rng(11).integers(0, 256, n, dtype=np.uint8)
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=1).reshape(-1).astype(np.int32)
    int4 = np.where(nibbles >= 8, nibbles - 16, nibbles)
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)
    fp4 = np.where(nibbles >= 8, -1.0, 1.0) * e2m1[nibbles & 7]
    i4, f4 = kernel(packed)
    np.testing.assert_array_equal(i4, int4)
    np.testing.assert_array_equal(f4, fp4)
