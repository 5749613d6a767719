"""TileLang's ``T.*`` names beyond the developer tier: each checked against numpy or the IR."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from tvm import tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TileWarning, UnsupportedOnTargetError
from tile.lang._src.unsupported import UNSUPPORTED
from tile.lang.errors import ArgumentTypeError, ArgumentValueError, TileTypeError
from tile.testsupport.markers import needs_backend


@T.prim_func
def _math_and_indices(
    A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "float32"), C: T.Tensor((8, 16), "int32")
):
    with T.Kernel(8, threads=16) as bx:
        L = T.alloc_buffer((16,), "float32", scope="local.fragment")
        for i in T.Parallel(16):
            x = A[bx, i]
            L[i] = T.clamp(T.sin(x) + T.erf(x) * T.cos(x), min_val=-0.5, max_val=T.float32(0.75)) + T.trunc(
                x * 3.0
            )
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
    assert (T.float, T.int, T.uint, T.half, T.short, T.long) == (
        "float32",
        "int32",
        "uint32",
        "float16",
        "int16",
        "int64",
    )
    assert str(T.float(1).ty) == "float32"
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
    ):
        assert getattr(T, name) is getattr(tirx, name)
    # element types are T.dtype objects (a str and a tvm.DataType, as TileLang's) that construct
    # values as TVMScript's do
    import tvm

    for name in ("float8_e8m0fnu", "float16x2", "int8x4", "float4_e2m1fnx2", "bool", "double", "tfloat32x4"):
        made = getattr(T, name)
        assert isinstance(made, T.dtype) and isinstance(made, tvm.DataType), name
    assert T.float16x2 == "float16x2" and T.double == "float64" and T.tfloat32x4 == "float32x4"
    assert T.float16x2.lanes == 2 and T.float8_e8m0fnu.bits == 8
    assert str(T.float8_e8m0fnu(1.0).ty) == str(tirx.float8_e8m0fnu(1.0).ty) == "float8_e8m0fnu"
    assert str(T.int8x4(1).ty) == "int8x4"  # an integer constant in every lane
    with pytest.raises(ArgumentTypeError, match="builds no float16x2 scalar"):
        T.float16x2(1.0)  # apache-tvm registers no builder for it: a TypeError, not an AttributeError
    # T.thread_binding wraps TVMScript's: it also notes the thread axis for T.tvm_thread_allreduce
    # (test_lang_compat_frontend_forms.py runs its assignment form).
    assert T.thread_binding is not tirx.thread_binding and T.thread_binding.__module__.startswith("tile.lang")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile CUDA")
@needs_backend("cuda")
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


def test_a_dtype_called_without_a_value_declares_a_variable():
    # TileLang's T.float() (a C name) and T.dtype("float16")() declare a scalar, as T.float32() does
    for made, expected in ((T.dtype("float16")(), "float16"), (T.float(), "float32"), (T.uint(), "uint32")):
        assert isinstance(made, tirx.Var) and str(made.ty) == expected
    with pytest.raises(ArgumentTypeError, match="needs a value"):
        T.int4()  # TVMScript has no 4-bit scalars


def _lanes_swapped(dtype: str, vector: str):
    @T.prim_func
    def swap(A: T.Tensor((4,), dtype), B: T.Tensor((4,), dtype)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_var(vector)
            packed = T.dtype(vector)(A[1], A[0] * 2.0)  # one value per lane, in order
            B[0] = T.extract_lane(packed, 0)
            B[1] = T.extract_lane(packed, 1)
            B[2] = T.extract_lane(T.float32x2(A[2], 3), 1)  # a Python number becomes a constant
            B[3] = A[3]

    return swap


@pytest.mark.parametrize(
    "target",
    [
        "cpu",
        pytest.param({"kind": "cuda", "arch": "sm_80"}, marks=needs_backend("cuda"), id="sm_80"),
        pytest.param({"kind": "rocm", "arch": "gfx90a"}, marks=needs_backend("rocm"), id="gfx90a"),
    ],
)
@pytest.mark.parametrize(("dtype", "vector"), [("float16", "float16x2"), ("float32", "float32x2")])
def test_a_vector_dtype_called_with_its_lanes_packs_them(target, dtype, vector, monkeypatch):
    # TileLang's T.bfloat16x2(a, b): a vector value of the lanes given (language/extract_lane)
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.array([1.25, -2.5, 7.0, 4.0], dtype=dtype)
    b = tilelang.compile(_lanes_swapped(dtype, vector), out_idx=[-1], target=target)(a)
    np.testing.assert_array_equal(b, np.array([-2.5, 2.5, 3.0, 4.0], dtype=dtype))


def test_a_vector_dtype_takes_one_value_per_lane():
    with pytest.raises(ArgumentValueError, match="3 values for 2 lanes"):
        T.float16x2(1.0, 2.0, 3.0)
    packed = T.int8x4(1, 2, 3, tirx.Var("x", "int32"))
    assert isinstance(packed, tirx.Shuffle) and str(packed.ty) == "int8x4"
    assert str(packed.vectors[3].ty) == "int8"  # converted to the element type


@T.prim_func
def _global_scratch(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(4, threads=8) as bx:
        G = T.alloc_global((8,), "float32")
        for i in T.Serial(8):
            G[i] = A[bx, i] * 2.0
        for i in T.Serial(8):
            B[bx, i] = G[7 - i]


def test_alloc_global_is_scratch_memory_of_the_kernel():
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = tilelang.compile(_global_scratch, out_idx=[-1], target="cpu")(a)
    np.testing.assert_array_equal(b, 2 * a[:, ::-1])


@T.prim_func
def _producer_consumer(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((128,), "float32")
        bars = T.alloc_barrier([128, 128])
        tx = T.get_thread_binding(0)
        with T.ws(1):  # producer warpgroup
            S[tx - 128] = A[tx - 128] * 2.0
            T.fence_proxy_async()
            T.mbarrier_arrive(bars[1])
        with T.ws(0):  # consumer warpgroup
            T.mbarrier_wait_parity(bars[1], 0)
            B[tx] = S[127 - tx] + T.cast(T.get_warp_group_idx(), "float32")


@needs_backend("cuda")
def test_hand_written_warp_specialization_with_mbarriers_runs_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_producer_consumer, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    source = kernel.get_kernel_source("cuda")
    assert source.count("tile_mbarrier_init(") == 2 and "tile_mbarrier_wait(" in source
    a = np.arange(128, dtype="float32")
    np.testing.assert_array_equal(kernel(a), 2 * a[::-1])


@T.prim_func
def _two_phases(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    # the same hand-off twice, without the sm_90 proxy fence: phases 0 and 1 of one barrier
    with T.Kernel(1, threads=256):
        S = T.alloc_shared((128,), "float32")
        bar = T.alloc_barrier(128)
        done = T.alloc_barrier(128)
        tx = T.get_thread_binding(0)
        if tx >= 128:  # producer warpgroup
            S[tx - 128] = A[tx - 128] * 2.0
            T.mbarrier_arrive(bar)
            T.mbarrier_wait_parity(done, 0)  # the consumer has read the first values
            S[tx - 128] = S[tx - 128] + 1.0
            T.mbarrier_arrive(bar)
        else:
            T.mbarrier_wait_parity(bar, 0)
            first = S[127 - tx]
            T.mbarrier_arrive(done)
            T.mbarrier_wait_parity(bar, 1)
            B[tx] = first * 10.0 + S[127 - tx]


@pytest.mark.vendor_compile  # nvcc checks the PTX of each arch's mbarrier forms
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90a"])
@needs_backend("cuda")
def test_hand_written_mbarriers_compile_from_sm80(arch, monkeypatch):
    # mbarrier objects, arrive and test_wait are sm_80+ (PTX); the header used sm_90's init
    # fence and try_wait on every arch, which ptxas refused for sm_80-89 (TileLang's
    # target/alloc_barrier_target_guard on sm_86)
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_two_phases, out_idx=[-1], target={"kind": "cuda", "arch": arch})
    a = np.arange(128, dtype="float32")
    want = (2 * a[::-1]) * 10.0 + (2 * a[::-1] + 1.0)
    np.testing.assert_array_equal(kernel(a), want)


def _expert_call(call: str):
    @T.prim_func
    def main(C: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            if call == "cp_async":
                S = T.alloc_shared((8,), "float32")
                T.ptx_cp_async(T.access_ptr(S[0], "w"), T.access_ptr(C[0], "r"), 1)  # the line
            bar = T.alloc_barrier(1)
            if call == "expect_tx":
                T.mbarrier_expect_tx(bar, 16)  # the line the error names
            elif call == "fence":
                T.fence_proxy_async()  # the line the error names
            C[0] = 0.0

    return main


@pytest.mark.parametrize(
    ("call", "arch", "says"),
    [
        ("barrier", "sm_75", r"T\.alloc_barrier needs mbarrier objects \(sm_80\+\); the target is sm_75"),
        ("expect_tx", "sm_86", r"T\.mbarrier_expect_tx needs mbarrier transaction counts \(sm_90\+\)"),
        ("fence", "sm_80", r"T\.fence_proxy_async needs the async proxy"),
        ("cp_async", "sm_75", r"T\.ptx_cp_async .*needs cp\.async \(sm_80\+\)"),
    ],
)
@needs_backend("cuda")
def test_an_expert_call_the_arch_lacks_names_its_line(call, arch, says):
    # ptxas refused these after code generation ("Feature 'mbarrier.init' requires .target sm_80")
    with pytest.raises(UnsupportedOnTargetError, match=says) as info:
        tilelang.compile(_expert_call(call), out_idx=[-1], target={"kind": "cuda", "arch": arch})
    where = info.value.location
    assert where is not None and where.filename == __file__
    expected = {"barrier": "T.alloc_barrier(1)", "expect_tx": "the line the error names", "fence": "the line",
                "cp_async": "the line"}  # fmt: skip
    assert expected[call] in (where.source_line or "")


@T.prim_func
def _warp_votes(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding(0)
        v = A[tx]
        B[tx] = T.shfl_sync(v, (T.get_lane_idx() + 1) % 32)
        T.sync_warp()
        C[tx] = (
            T.cast(T.ballot_sync(v > 0.0) % 2, "int32")
            + T.get_warp_idx() * 10
            + T.any_sync(v > 100.0) * 100
            + T.all_sync(v > -100.0) * 1000
        )


@needs_backend("cuda")
def test_warp_shuffles_and_votes_run_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_warp_votes, out_idx=[1, 2], target={"kind": "cuda", "arch": "sm_80"})
    a = np.random.default_rng(3).standard_normal(64).astype("float32")
    b, c = kernel(a)
    lane = np.arange(64) % 32
    np.testing.assert_array_equal(b, a[np.arange(64) - lane + (lane + 1) % 32])
    lowest_lane_positive = np.repeat([int(a[w * 32] > 0) for w in (0, 1)], 32)  # ballot bit 0
    np.testing.assert_array_equal(c, lowest_lane_positive + (np.arange(64) // 32) * 10 + 1000)


def test_set_max_nreg_checks_the_count():
    with pytest.raises(TileTypeError, match="multiple of 8"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128):
                T.set_max_nreg(100, 1)


@T.prim_func
def _pairs_and_aliases(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=8):
        S = T.alloc_shared((8,), "float32")
        T.copy(A, S)
        alias = T.make_tensor(S.data, (2, 4), "float32")
        for i in T.Serial(8):
            x = alias[i // 4, i % 4]
            B[i] = T.add2(x, 1.0) + T.mul2(x, 2.0) - T.sub2(x, 3.0) + T.fma2(x, x, 1.0) + T.max2(x, 0.0)
            B[i] = B[i] + T.min2(x, 0.0) + T.abs2(x)
        T.pdl_trigger()
        T.pdl_sync()


def test_pair_ops_make_tensor_and_pdl_on_the_cpu():
    a = np.random.default_rng(4).standard_normal(8).astype("float32")
    b = tilelang.compile(_pairs_and_aliases, out_idx=[-1], target="cpu")(a)
    ref = (a + 1) + 2 * a - (a - 3) + (a * a + 1) + np.maximum(a, 0) + np.minimum(a, 0) + np.abs(a)
    np.testing.assert_allclose(b, ref, rtol=1e-6)


def test_access_ptr_is_the_element_address():
    import tvm

    buffer = tvm.tirx.decl_buffer((4, 8), "float32", name="A")
    assert str(T.access_ptr(buffer[1, 2], "r")) == "T.address_of(A[1, 2])"
    assert str(T.access_ptr(buffer)) == "T.address_of(A[0, 0])"
    with pytest.raises(TileTypeError, match="access_type"):
        T.access_ptr(buffer, "x")


_CP_BUF = tirx.decl_buffer((64,), "float32", name="S")


@T.prim_func
def _cp_async(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=16):
        S = T.alloc_shared((64,), "float32", scope="shared")
        tx = T.get_thread_binding(0)
        T.annotate_min_blocks_per_sm(2)
        T.ptx_cp_async(T.access_ptr(S[tx * 4], "w"), T.access_ptr(A[tx * 4], "r"), 4)
        T.ptx_commit_group()
        T.ptx_wait_group(0)
        T.sync_threads()
        for i in T.Serial(4):
            B[tx * 4 + i] = S[63 - tx * 4 - i] + T.cast(T.shuffle_elect(4), "float32")


@needs_backend("cuda")
def test_cp_async_and_elect_run_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_cp_async, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    a = np.arange(64, dtype="float32")
    elected = ((np.arange(64) // 4) % 4 == 0).astype("float32")  # threads 0, 4, 8, 12
    np.testing.assert_array_equal(kernel(a), a[::-1] + elected)
    # TileLang's count is of elements (4 float32 above are 16 bytes): 16 float32 are 64
    with pytest.raises(TileTypeError, match="4, 8 or 16 bytes; 16 elements of 4 bytes are 64"):
        T.ptx_cp_async(T.access_ptr(_CP_BUF[0], "w"), T.access_ptr(_CP_BUF[0], "r"), 16)
    with pytest.raises(TileTypeError, match="element addresses"):
        T.ptx_cp_async(None, None, 4)


_N, _H, _W, _C, _KS, _S, _D, _P = 2, 6, 5, 3, 3, 2, 1, 1
_OH = (_H + 2 * _P - _D * (_KS - 1) - 1) // _S + 1
_OW = (_W + 2 * _P - _D * (_KS - 1) - 1) // _S + 1
_BM, _BK = 8, 8


@T.prim_func
def _im2col_tiles(
    A: T.Tensor((_N, _H, _W, _C), "float32"),
    Out: T.Tensor((T.ceildiv(_N * _OH * _OW, _BM) * _BM, T.ceildiv(_KS * _KS * _C, _BK) * _BK), "float32"),
):
    with T.Kernel(T.ceildiv(_KS * _KS * _C, _BK), T.ceildiv(_N * _OH * _OW, _BM), threads=32) as (bx, by):
        tile = T.alloc_shared((_BM, _BK), "float32")
        T.im2col(A, tile, by, bx, _KS, _S, _D, _P)
        T.copy(tile, Out[by * _BM, bx * _BK])


def test_im2col_tiles_match_a_numpy_im2col():
    a = np.random.default_rng(5).standard_normal((_N, _H, _W, _C)).astype("float32")
    out = tilelang.compile(_im2col_tiles, out_idx=[-1], target="cpu")(a)
    padded = np.pad(a, ((0, 0), (_P, _P), (_P, _P), (0, 0)))
    ref = np.zeros_like(out)
    for n in range(_N):
        for oh in range(_OH):
            for ow in range(_OW):
                row = (n * _OH + oh) * _OW + ow
                for kh in range(_KS):
                    for kw in range(_KS):
                        h, w = oh * _S + kh * _D, ow * _S + kw * _D
                        ref[row, (kh * _KS + kw) * _C : (kh * _KS + kw + 1) * _C] = padded[n, h, w, :]
    np.testing.assert_array_equal(out, ref)


@tilelang.jit
def _scale_rows(A, block):
    M, N = T.const("M, N")
    dtype = T.float  # a dtype bound inside the kernel body, as TileLang programs do
    A: T.Tensor((M, N), dtype)
    B = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
        rows = T.alloc_fragment((block, N), dtype)
        T.copy(A[bx * block, 0], rows)
        for i, j in T.Parallel(block, N):
            rows[i, j] = rows[i, j] * 2.0 + T.float(1)
        T.copy(rows, B[bx * block, 0])
    return B


def test_dtype_names_bind_inside_kernel_bodies():
    a = np.random.default_rng(6).standard_normal((16, 8)).astype("float32")
    np.testing.assert_allclose(_scale_rows(a, 8), 2 * a + 1, rtol=1e-6)


def test_var_is_the_type_of_symbolic_dims():
    # TileLang programs branch on isinstance(M, T.Var) to tell a symbolic dim from a number
    m = T.dynamic("m")
    assert isinstance(m, T.Var) and not isinstance(64, T.Var)
    x = T.Var("x", T.int32)
    assert isinstance(x, T.Var) and x.name == "x" and "int32" in repr(x.ty)


@T.prim_func
def _fast_math(
    A: T.Tensor((8, 32), "float32"), B: T.Tensor((8, 32), "float32"), H: T.Tensor((8, 32), "float16")
):
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(8, 32):
            x = A[i, j]
            y = x + 2.0
            B[i, j] = T.__exp(x) + T.__exp10(x) + T.__log(y) + T.__log2(y) + T.__log10(y)
            H[i, j] = (
                T.__tan(T.cast(x, "float16")) + T.__cos(T.cast(x, "float16")) + T.__sin(T.cast(x, "float16"))
            )


@pytest.mark.parametrize("target", ["cpu", pytest.param("emu", marks=needs_backend("cuda"))])
def test_fast_math_names_compute_their_functions(target, monkeypatch):
    # TileLang's T.__exp ... T.__sin: the precise functions on the CPU, and under the emulator its __expf ...
    if target == "emu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
        target = {"kind": "cuda", "arch": "sm_80"}
    a = np.random.default_rng(0).uniform(-1, 1, (8, 32)).astype("float32")
    b, h = tilelang.compile(_fast_math, out_idx=[1, 2], target=target)(a)
    y = a + 2
    np.testing.assert_allclose(b, np.exp(a) + 10**a + np.log(y) + np.log2(y) + np.log10(y), rtol=1e-5)
    a16 = a.astype("float16").astype("float32")
    np.testing.assert_allclose(h.astype("float32"), np.tan(a16) + np.cos(a16) + np.sin(a16), atol=4e-3)
    assert T.__exp.__name__ == "__exp"


@pytest.mark.parametrize("dtype", ["int32", "bool", "float8_e4m3fn"])
def test_fast_math_names_refuse_non_float_values(dtype):
    with pytest.raises(TypeError, match=rf"T\.__log only supports floating-point inputs, but got {dtype}"):
        T.__log(tirx.Var("v", dtype))


@T.prim_func
def _one_dim_grid_as_tuple(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as (bx,):  # TileLang programs unpack a 1-D grid's index too
        for i in T.Parallel(32):
            B[bx * 32 + i] = A[bx * 32 + i] * 3.0 + bx


def test_a_one_dim_grid_index_unpacks_from_a_one_name_tuple():
    a = np.arange(64, dtype="float32")
    b = tilelang.compile(_one_dim_grid_as_tuple, out_idx=[-1], target="cpu")(a)
    np.testing.assert_array_equal(b, a * 3 + np.repeat([0.0, 1.0], 32))


def _scan_rows(op):
    @T.prim_func
    def main(A: T.Tensor((4, 16), "float32"), B: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4, 16), "float32")
            T.copy(A, S)
            scan = T.cumsum if op == "cumsum" else T.cummax  # a T.* function bound to a name
            scan(src=S, dim=1)
            T.copy(S, B)

    return main


@pytest.mark.parametrize("op", ["cumsum", "cummax"])
def test_a_name_bound_to_a_function_in_a_kernel_body_calls_it(op):
    a = np.random.default_rng(7).standard_normal((4, 16)).astype("float32")
    b = tilelang.compile(_scan_rows(op), out_idx=[-1], target="cpu")(a)
    ref = np.cumsum(a, axis=1) if op == "cumsum" else np.maximum.accumulate(a, axis=1)
    np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-5)


@T.prim_func
def _no_grid(A: T.Tensor((16,), "float32"), B: T.Tensor((1,), "float32")):
    with T.Kernel(threads=32):  # T.Kernel() without extents: one block, as in TileLang
        tile = T.alloc_fragment((16,), "float32")
        total = T.alloc_fragment((1,), "float32")
        T.copy(A, tile)
        T.reduce_sum(tile, total, dim=0)
        T.copy(total, B)


def test_a_kernel_without_grid_extents_is_one_block():
    a = np.arange(16, dtype="float32")
    np.testing.assert_allclose(tilelang.compile(_no_grid, out_idx=[-1], target="cpu")(a), [a.sum()])


@T.prim_func
def _subscript_annotations(
    A: T.Tensor[(8,)], B: T.Tensor[(8, 4), T.float32], C: T.Tensor[8, T.float32], D: T.Tensor[8, 4]
):
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(8, 4):
            D[i, j] = A[i] + B[i, j] * C[i]


def test_tensor_subscript_annotations_default_to_float32():
    rng = np.random.default_rng(8)
    a, c = rng.standard_normal(8).astype("float32"), rng.standard_normal(8).astype("float32")
    b = rng.standard_normal((8, 4)).astype("float32")
    d = tilelang.compile(_subscript_annotations, out_idx=[-1], target="cpu")(a, b, c)
    np.testing.assert_allclose(d, a[:, None] + b * c[:, None], rtol=1e-6)


@T.prim_func
def _shifted_rows(A: T.Tensor((64, 16), "float16"), B: T.Tensor((64, 16), "float16")):
    with T.Kernel(1, 4, threads=128) as (bx, by):
        S = T.alloc_shared((16, 16), "float16")
        T.annotate_safe_value({A: 7})  # reads of A outside its bounds give 7
        for i, j in T.Parallel(16, 16):
            S[i, j] = A[by * 16 + i - 3, bx * 16 + j]
        for i, j in T.Parallel(16, 16):
            B[by * 16 + i, bx * 16 + j] = S[i, j]


@pytest.mark.parametrize("target", ["cpu", pytest.param("emu", marks=needs_backend("cuda"))])
def test_safe_values_replace_out_of_bounds_reads(target, monkeypatch):
    if target == "emu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
        target = {"kind": "cuda", "arch": "sm_80"}
    a = np.random.default_rng(9).standard_normal((64, 16)).astype("float16")
    b = tilelang.compile(_shifted_rows, out_idx=[-1], target=target)(a)
    expected = np.concatenate([np.full((3, 16), 7, "float16"), a[:-3]])
    np.testing.assert_array_equal(b, expected)


def _tail_tiles_with_a_safe_value(m: int, n: int, block: int, dst_dtype: str) -> T.PrimFunc:
    rows, cols = -(-m // block) * block, -(-n // block) * block

    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((rows, cols), dst_dtype)):
        with T.Kernel(cols // block, rows // block, threads=128) as (bx, by):
            T.annotate_safe_value({A: -99})  # a T.copy from A reads -99 outside it (TileLang's copy test)
            T.copy(
                A[by * block : (by + 1) * block, bx * block : (bx + 1) * block],
                B[by * block : (by + 1) * block, bx * block : (bx + 1) * block],
            )

    return main


@pytest.mark.parametrize("target", ["cpu", pytest.param("emu", marks=needs_backend("cuda"))])
@pytest.mark.parametrize("dst_dtype", ["float32", "float16"])
def test_a_copy_from_a_tensor_with_a_safe_value_pads_with_it(target, dst_dtype, monkeypatch):
    # before: the copy's own guard read 0 outside A (and on the emulator the corner of the copy's
    # source region was rewritten into a guarded expression, which stopped the compile)
    if target == "emu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
        target = {"kind": "cuda", "arch": "sm_80"}
    m, n = 70, 75
    a = np.random.default_rng(11).standard_normal((m, n)).astype("float32")
    b = tilelang.compile(_tail_tiles_with_a_safe_value(m, n, 32, dst_dtype), out_idx=[-1], target=target)(a)
    expected = np.full((96, 96), -99, dst_dtype)
    expected[:m, :n] = a.astype(dst_dtype)
    np.testing.assert_array_equal(np.asarray(b), expected)


def _chained_stores(dtype):
    @T.prim_func
    def main(A: T.Tensor((32,), dtype), B: T.Tensor((32,), "int32"), C: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = B[i] = C[i] = T.cast(i, "float32") * 0.75  # each store converts to its own dtype
            x = y = 2.5
            A[0] = x + y

    return main


def test_chained_assignments_in_a_prim_func_store_each_target():
    a, b, c = tilelang.compile(_chained_stores("float32"), out_idx=[0, 1, 2], target="cpu")()
    i = np.arange(32)
    np.testing.assert_array_equal(b, (i * 0.75).astype("int32"))
    np.testing.assert_allclose(c, i * 0.75)
    np.testing.assert_allclose(a, np.concatenate([[5.0], i[1:] * 0.75]))


def _masked_load(first, last, use_copy):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 2, threads=128) as (_bx, by):
            S = T.alloc_shared((32, 64), "float16")
            tx = T.get_thread_binding(0)
            if tx >= first and tx < last:  # only these threads load the tile
                if use_copy:
                    T.copy(A[by * 32, 0], S)
                else:
                    for i, k in T.Parallel(32, 64):
                        S[i, k] = A[by * 32 + i, k] * 2.0
            T.copy(S, B[by * 32, 0])

    return main


@needs_backend("cuda")
@pytest.mark.parametrize(("first", "last", "use_copy"), [(0, 64, False), (64, 128, False), (32, 48, True)])
def test_a_tile_loop_under_a_thread_range_condition_runs_on_those_threads(first, last, use_copy, monkeypatch):
    # TileLang spreads a T.Parallel / T.copy inside `if tx < 64:` over the threads that pass
    # (as under T.ws); spread over the whole block, half of the tile was never loaded
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(10).standard_normal((64, 64)).astype("float16")
    kernel = tilelang.compile(
        _masked_load(first, last, use_copy), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}
    )
    np.testing.assert_array_equal(kernel(a), a if use_copy else (a.astype("float32") * 2).astype("float16"))


@T.prim_func
def _assumed_in_bounds(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            T.assume(bx * 128 + i < 256)  # a hint only: the kernel computes the same
            B[bx * 128 + i] = A[bx * 128 + i] + 1.0


@pytest.mark.parametrize("target", ["cpu", pytest.param("emu", marks=needs_backend("cuda"))])
def test_assume_is_a_hint_on_every_target(target, monkeypatch):
    if target == "emu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
        target = {"kind": "cuda", "arch": "sm_80"}
    a = np.arange(256, dtype="float32")
    np.testing.assert_array_equal(tilelang.compile(_assumed_in_bounds, out_idx=[-1], target=target)(a), a + 1)


def test_cast_takes_tilelangs_rounding_arguments():
    # TileLang's T.cast(value, dtype, round="", sat=True, rbits=None), checked as TileLang does
    x = tirx.Var("x", "float32")
    assert str(T.cast(x, "float16", round="rn", sat=True).ty) == "float16"
    with pytest.raises(ValueError, match="Invalid round"):
        T.cast(x, "float8_e4m3fn", round="up")
    with pytest.raises(ValueError, match="Invalid sat"):
        T.cast(x, "float8_e4m3fn", sat="yes")
    with pytest.raises(ValueError, match="rbits is required"):
        T.cast(x, "float8_e4m3fn", round="rs")
    with pytest.raises(ValueError, match="rbits is only valid"):
        T.cast(x, "float8_e4m3fn", round="rn", rbits=T.int32(42))
    with pytest.raises(UnsupportedOnTargetError, match="sm_100a"):
        T.cast(x, "float16", round="rs", rbits=T.uint32(7))


def _cast_toward_zero():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                B[i] = T.cast(A[i], "float16", round="rz")  # reserved: the default conversion

    return main


def test_a_reserved_rounding_mode_is_the_default_conversion_with_a_warning():
    with pytest.warns(TileWarning, match="reserved") as caught:
        kernel = tilelang.compile(_cast_toward_zero(), out_idx=[-1], target="cpu")
    assert caught[0].filename == __file__  # at the kernel's line
    a = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 3 * 2.0**-11), 65519.0], dtype=np.float32)
    np.testing.assert_array_equal(kernel(a), a.astype(np.float16))  # nearest even, not toward zero
