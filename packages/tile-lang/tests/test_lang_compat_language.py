"""TileLang's ``T.*`` names beyond the developer tier: each checked against numpy or the IR."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.lang._src.unsupported import UNSUPPORTED
from tile.lang.errors import TileTypeError


@T.prim_func
def _math_and_indices(
    A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "float32"), C: T.Tensor((8, 16), "int32")
):
    with T.Kernel(8, threads=16) as bx:
        L = T.alloc_buffer((16,), "float32", scope="local.fragment")
        for i in T.Parallel(16):
            x = A[bx, i]
            L[i] = T.clamp(T.sin(x) + T.erf(x) * T.cos(x), -0.5, T.float32(0.75)) + T.trunc(x * 3.0)
        T.copy(L, B[bx, :])
        for i in T.Serial(16):
            row_col = T.index_to_coordinates(i, (2, 8))
            C[bx, i] = (
                row_col[0] * 100 + row_col[1] + T.get_block_binding(0) * 1000 + T.align_up(i, 4) * 10000
            )


def test_math_dtypes_and_index_helpers_run_on_the_cpu():
    a = np.random.default_rng(0).standard_normal((8, 16)).astype("float32")
    b, c = tilelang.compile(_math_and_indices, out_idx=[1, 2], target="cpu")(a)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(
        b, np.clip(np.sin(a) + erf(a) * np.cos(a), -0.5, 0.75) + np.trunc(a * 3), atol=1e-5
    )
    i = np.arange(16)
    expected = (i // 8) * 100 + i % 8 + np.arange(8)[:, None] * 1000 + ((i + 3) // 4 * 4) * 10000
    np.testing.assert_array_equal(c, expected)


@T.prim_func
def _ieee_ops(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            x = A[i]
            y = B[i]
            C[i] = (
                T.ieee_add(x, y)
                + T.ieee_mul(x, y)
                - T.ieee_sub(y, x)
                + T.ieee_fdiv(x, y)
                + T.ieee_fmaf(x, y, x)
                + T.ieee_fsqrt(T.abs(y))
                + T.ieee_frcp(y)
                + T.fast_rcp(y)
                + T.ieee_frsqrt(T.abs(y))
            )


def test_ieee_helpers_match_numpy():
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, 64).astype("float32")
    b = rng.uniform(0.5, 2.0, 64).astype("float32")
    c = tilelang.compile(_ieee_ops, out_idx=[-1], target="cpu")(a, b)
    ref = (a + b) + a * b - (b - a) + a / b + (a * b + a) + np.sqrt(b) + 2 / b + 1 / np.sqrt(b)
    np.testing.assert_allclose(c, ref, rtol=1e-5)


def test_ieee_rounding_modes_other_than_nearest_are_refused():
    with pytest.raises(TileTypeError, match="round-to-nearest-even"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                for i in T.Parallel(4):
                    A[i] = T.ieee_add(A[i], A[i], rounding_mode="rz")


@T.prim_func
def _views(A: T.Tensor((4, 8), "float32"), B: T.Tensor((32,), "float32"), C: T.Tensor((4, 8), "int32")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((4, 8), "float32")
        T.copy(A, S)
        flat = T.reshape(S, (32,))
        bits = T.view(S, (4, 8), "int32")
        for i in T.Serial(32):
            B[i] = flat[i] * 2.0
        for i, j in T.grid(4, 8):
            C[i, j] = bits[i, j]


def test_reshape_and_view_alias_the_same_memory():
    a = np.random.default_rng(2).standard_normal((4, 8)).astype("float32")
    b, c = tilelang.compile(_views, out_idx=[1, 2], target="cpu")(a)
    np.testing.assert_array_equal(b, 2 * a.reshape(32))
    np.testing.assert_array_equal(c, a.view("int32"))


def test_view_must_cover_the_same_bytes():
    with pytest.raises(TileTypeError, match="same bytes"):

        @T.prim_func
        def bad(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((4, 8), "float32")
                T.view(S, (4, 8), "float16")


def test_dtype_objects_are_names_and_constructors():
    torch = pytest.importorskip("torch")
    half = T.dtype("float16")
    assert half == "float16" and half.bits == 16 and half.lanes == 1
    assert half.as_torch() is torch.float16
    assert T.dtype(torch.bfloat16) == "bfloat16" and T.dtype(T.float32) == "float32"
    assert T.int4.bits == 4 and T.uint4 == "uint4" and T.bfloat16x2.lanes == 2
    assert str(T.dtype("float16")(1.5).ty) == "float16" and float(T.dtype("float16")(1.5).value) == 1.5
    assert T.float is T.float32 and T.int is T.int32 and T.uint is T.uint32 and T.half is T.float16
    assert T.float16x2 is not None and T.float4_e2m1fn is not None  # TVMScript's vector / fp4 types


def test_names_needing_untargeted_hardware_say_so_at_their_line():
    assert {"tcgen05_gemm", "alloc_tmem", "ClusterKernel", "clc_try_cancel"} <= set(UNSUPPORTED)
    with pytest.raises(UnsupportedOnTargetError, match=r"tcgen05.*sm_100") as info:

        @T.prim_func
        def blackwell(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128):
                T.alloc_tmem([128, 64], "float32")

    assert info.value.location is not None and "alloc_tmem" in str(info.value) and info.value.hint


def test_tir_builtins_are_tvmscript_s():
    from tvm.script import tirx

    for name in (
        "sin",
        "Select",
        "tvm_storage_sync",
        "address_of",
        "dp4a",
        "thread_binding",
        "float8_e8m0fnu",
    ):
        assert getattr(T, name) is getattr(tirx, name)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile CUDA")
def test_sync_threads_is_a_block_barrier_in_cuda_source():
    @T.prim_func
    def synced(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), "float32")
            for i in T.Parallel(128):
                S[i] = A[i]
            T.sync_threads()
            for i in T.Parallel(128):
                B[i] = S[127 - i]

    kernel = tilelang.compile(synced, target={"kind": "cuda", "arch": "sm_80"})
    assert "__syncthreads()" in kernel.get_kernel_source("cuda")


def test_a_dtype_constructor_needs_a_value():
    with pytest.raises(TileTypeError, match="needs a value"):
        T.dtype("float16")()
