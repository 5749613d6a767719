"""The modules and top-level names TileLang programs import, each checked against a reference."""

from __future__ import annotations

import math
import sys
import time
import types

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
import tile.lang.testing  # noqa: F401  (makes tilelang.testing reachable, as in TileLang programs)
from tile.ir.errors import TargetError, TileTypeError
from tile.lang._src import cache as cache_module
from tile.lang._src import testing as testing_impl
from tile.lang._src.pass_config import HONOURED, NO_EFFECT, REJECTED, apply_pass_configs
from tile.lang.cuda.intrinsics import get_mma_micro_size, make_mma_swizzle_layout
from tile.lang.language.fp8 import Fp8FormatError, determine_fp8_type
from tile.lang.profiler import BenchError, do_bench
from tile.lang.utils.tensor import (
    TensorSupplyType,
    TorchDtypeError,
    get_tensor_supply,
    map_torch_type,
    torch_assert_close,
)
from tile.testsupport.markers import needs_backend

torch = pytest.importorskip("torch")


def test_do_bench_measures_the_callable_in_milliseconds():
    calls = []

    def sleeper():
        calls.append(1)
        time.sleep(0.002)

    ms = do_bench(sleeper, _n_warmup=2, _n_repeat=5)
    assert len(calls) == 1 + 2 + 5  # one estimate, the warmups, the timed repeats
    assert 1.9 <= ms < 50
    low, mid, high = do_bench(sleeper, _n_warmup=1, _n_repeat=5, quantiles=[0.0, 0.5, 1.0])
    assert 1.9 <= low <= mid <= high
    assert do_bench(sleeper, _n_warmup=1, _n_repeat=3, return_mode="min") >= 1.9
    with pytest.raises(BenchError, match="return_mode"):
        do_bench(sleeper, return_mode="average")


def test_torch_assert_close_allows_the_mismatch_ratio_and_no_more():
    ref = torch.ones(1000)
    near = ref.clone()
    near[:1] = 2.0  # 1 of 1000 off
    torch_assert_close(near, ref, max_mismatched_ratio=0.001)
    near[:2] = 2.0
    with pytest.raises(AssertionError, match="2 of 1000 elements"):
        torch_assert_close(near, ref, max_mismatched_ratio=0.001)
    torch_assert_close(ref * 1.005, ref, rtol=1e-2, atol=0)  # |a-b| <= atol + rtol*|b|
    with pytest.raises(AssertionError, match="dtype"):
        torch_assert_close(ref.half(), ref)
    torch_assert_close(ref.half(), ref, check_dtype=False)
    torch_assert_close(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(AssertionError, match="shape"):
        torch_assert_close(torch.ones(3), torch.ones(4))


def test_map_torch_type_and_tensor_supply():
    assert map_torch_type("float16") is torch.float16
    assert map_torch_type("float8_e4m3") is torch.float8_e4m3fn
    assert map_torch_type(torch.int8) is torch.int8
    with pytest.raises(TorchDtypeError, match="no dtype"):
        map_torch_type("float7")
    param = types.SimpleNamespace(shape=(4, 8), dtype="float16")
    ones = get_tensor_supply(TensorSupplyType.One)(param)
    assert ones.dtype is torch.float16 and tuple(ones.shape) == (4, 8) and bool((ones == 1).all())
    ints = get_tensor_supply(TensorSupplyType.Integer)(types.SimpleNamespace(shape=(256,), dtype="int32"))
    assert ints.dtype is torch.int32 and int(ints.min()) >= -2 and int(ints.max()) <= 2
    assert set(ints.tolist()) > {0}  # not all zeros
    zeros = get_tensor_supply(TensorSupplyType.Zero)(types.SimpleNamespace(shape=(3,), dtype="bfloat16"))
    assert zeros.dtype is torch.bfloat16 and not zeros.any()


def test_set_random_seed_makes_every_generator_repeat():
    tilelang.testing.set_random_seed(7)
    first = (torch.rand(4), np.random.rand(4))
    tilelang.testing.set_random_seed(7)
    second = (torch.rand(4), np.random.rand(4))
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1])


def _skips(decorator) -> bool:
    def test_fn() -> None:
        pass

    (mark,) = decorator(test_fn).pytestmark
    return bool(mark.args[0])


def test_requires_markers_follow_what_the_backends_can_run(monkeypatch):
    monkeypatch.setattr(testing_impl, "_runnable", lambda kind: None)
    assert _skips(tilelang.testing.requires_cuda)
    monkeypatch.setattr(testing_impl, "_cuda_version", lambda: (9, 0))
    monkeypatch.setattr(testing_impl, "_runnable", lambda kind: object() if kind == "cuda" else None)
    assert not _skips(tilelang.testing.requires_cuda)
    assert _skips(tilelang.testing.requires_rocm)
    assert not _skips(tilelang.testing.requires_cuda_compute_version_ge(8, 0))
    assert not _skips(tilelang.testing.requires_cuda_compute_version(9, 0, "eq"))
    assert _skips(tilelang.testing.requires_cuda_compute_version_lt(9, 0))
    assert _skips(tilelang.testing.requires_cuda_compute_version_gt(9, 0))
    assert not _skips(tilelang.testing.requires_package("numpy"))
    assert _skips(tilelang.testing.requires_package("no_such_package_here"))


@needs_backend("cuda")
def test_requires_cuda_runs_under_the_emulator(monkeypatch):
    testing_impl._runnable.cache_clear()
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_90a"}')
    try:
        assert testing_impl._cuda_version() == (9, 0)
        assert testing_impl._runnable("cpu") is not None
    finally:
        testing_impl._runnable.cache_clear()


def test_testing_main_runs_the_calling_file_under_pytest(monkeypatch):
    seen = []

    def fake_pytest_main(args):
        seen.append(args)
        return 3

    monkeypatch.setattr(pytest, "main", fake_pytest_main)
    monkeypatch.setattr(sys, "argv", ["prog", "-k", "gemm"])
    with pytest.raises(SystemExit) as info:
        tilelang.testing.main()
    assert info.value.code == 3
    assert seen == [[__file__, "-k", "gemm"]]


def test_fp8_type_follows_the_torch_build(monkeypatch):
    assert determine_fp8_type() == "float8_e4m3fn" and determine_fp8_type("e5m2") == "float8_e5m2"
    fake = types.SimpleNamespace(
        version=types.SimpleNamespace(hip="6.2"),
        cuda=types.SimpleNamespace(
            is_available=lambda: True,
            get_device_properties=lambda i: types.SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-"),
        ),
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert determine_fp8_type("e4m3") == "float8_e4m3fnuz"
    assert determine_fp8_type("e5m2") == "float8_e5m2fnuz"
    fake.cuda.get_device_properties = lambda i: types.SimpleNamespace(gcnArchName="gfx950")
    assert determine_fp8_type("e4m3") == "float8_e4m3fn"
    with pytest.raises(Fp8FormatError):
        determine_fp8_type("e3m4")


def test_top_level_names():
    import tvm

    assert tilelang.tvm is tvm
    assert tilelang.DataType("float16").bits == 16
    for a in (0, 1, 7, 8, 9, 1000):
        assert tilelang.cdiv(a, 8) == math.ceil(a / 8)
    assert [tilelang.next_power_of_2(n) for n in (0, 1, 2, 3, 33, 64)] == [1, 1, 2, 4, 64, 64]
    import tile.lang.cuda.intrinsics
    import tile.lang.layout

    assert (tilelang.Layout, tilelang.Fragment) == (tile.lang.layout.Layout, tile.lang.layout.Fragment)
    assert tilelang.cuda.intrinsics is tile.lang.cuda.intrinsics


def test_math_module():
    # TileLang's NSA examples: block_T = min(128, tilelang.math.next_power_of_2(dim))
    import tile.lang.math as tmath

    assert tilelang.math is tmath
    for n in range(1, 300):
        p = tmath.next_power_of_2(n)
        assert p >= n and p & (p - 1) == 0 and (p == 1 or p // 2 < n)
    assert [tmath.cdiv(a, 8) for a in (0, 1, 8, 9)] == [0, 1, 1, 2]


def test_disable_and_enable_cache_switch_the_disk_cache(monkeypatch):
    monkeypatch.setattr(cache_module, "_switched", [])
    monkeypatch.setenv("TILE_CACHE", "1")
    assert tilelang.is_cache_enabled()
    tilelang.disable_cache()
    assert not tilelang.is_cache_enabled()
    tilelang.enable_cache()
    monkeypatch.setenv("TILE_CACHE", "0")
    assert tilelang.is_cache_enabled()


def test_every_tilelang_pass_config_key_has_a_status():
    from tile.ir.target import Target

    key = tilelang.PassConfigKey
    assert key.TL_ENABLE_FAST_MATH == "tl.enable_fast_math"
    assert key.TL_ENABLE_FAST_MATH in NO_EFFECT and key.TL_DISABLE_WARP_SPECIALIZED in HONOURED
    base = Target.parse("cpu")
    configs = {key.TL_ENABLE_FAST_MATH: True, key.TL_DISABLE_PRELOWER_SEMANTIC_CHECK: True}
    assert apply_pass_configs(base, configs) == base  # accepted, not part of the target
    synced = apply_pass_configs(base, {key.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    assert synced.option("tl.disable_thread_storage_sync") == "1"  # honoured: the GPU backends read it
    with pytest.raises(TargetError, match="not supported") as info:
        apply_pass_configs(base, {key.TL_DEVICE_COMPILE_FLAGS: "-O3"})
    assert info.value.hint == REJECTED[key.TL_DEVICE_COMPILE_FLAGS]


def test_cuda_intrinsics_helpers():
    import tvm

    from tile.layout import make_swizzled_layout

    buffer = tvm.tirx.decl_buffer((64, 64), "float16")
    layout = make_mma_swizzle_layout(buffer)
    assert [int(e) for e in layout.map_forward_index([1, 0])] == [
        1,
        8,
    ]  # 128-byte XOR swizzle: chunk 0 ^ row 1
    reference = make_swizzled_layout([64, 64], "float16")
    for r, c in ((3, 17), (9, 40)):
        assert [int(e) for e in layout.map_forward_index([r, c])] == [
            int(e) for e in reference.map_forward_index([r, c])
        ]
    plain = make_mma_swizzle_layout(buffer, is_smooth=True)
    assert [int(e) for e in plain.map_forward_index([3, 17])] == [3, 17]
    assert get_mma_micro_size("float16") == (16, 16, 16)
    assert get_mma_micro_size("float8_e4m3") == (16, 16, 32)


@T.prim_func
def _through_swizzled_shared(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128):
        A_shared = T.alloc_shared((64, 64), "float16")
        T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared)})
        T.copy(A, A_shared)
        T.copy(A_shared, B)


def test_mma_swizzle_layout_annotates_a_kernel():
    a = np.random.default_rng(0).standard_normal((64, 64)).astype("float16")
    kernel = tilelang.compile(_through_swizzled_shared, out_idx=[-1], target="cpu")
    np.testing.assert_array_equal(kernel(a), a)


@T.prim_func
def _negate(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            B[i] = -A[i]


def test_par_compile_compiles_each_kernel():
    kernels = tilelang.par_compile([_negate, _negate], out_idx=[-1], target="cpu")
    a = np.arange(32, dtype="float32")
    assert all(np.array_equal(k(a), -a) for k in kernels)
    assert tilelang.par_compile([_negate], out_idx=[5], target="cpu", ignore_error=True) == [None]


@tilelang.jit(out_idx=[-1], target="cpu")
def _shifted(n, shift=1.0):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                B[i] = A[i] + shift

    return main


def test_a_jit_factory_par_compiles_its_configs():
    # TileLang's @jit objects: .par_compile(configs), a tuple is positional, a dict keywords
    kernels = _shifted.par_compile([(8,), {"n": 16, "shift": 3.0}, (4, -2.0)])
    for kernel, n, shift in zip(kernels, (8, 16, 4), (1.0, 3.0, -2.0), strict=True):
        a = np.arange(n, dtype="float32")
        np.testing.assert_array_equal(kernel(a), a + shift)
    assert kernels[0] is _shifted(8)  # the factory's own cache
    assert _shifted.par_compile([(8,), ("not a size",)], ignore_error=True)[1] is None


@tilelang.jit
def _eager_scale(A, factor, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(M, 16), threads=32) as bx:
        for i, j in T.Parallel(16, N):
            if bx * 16 + i < M:
                C[bx * 16 + i, j] = A[bx * 16 + i, j] * factor
    return C


def test_eager_kernels_compile_ahead_from_named_dims():
    kernel = _eager_scale.compile(M=40, N=8, factor=3.0)
    a = np.random.default_rng(1).standard_normal((40, 8)).astype("float32")
    np.testing.assert_allclose(kernel(a), 3.0 * a, rtol=1e-6)
    assert "T.prim_func" in kernel.get_kernel_source()
    with pytest.raises(tilelang.KernelArgumentError, match="expected 1 tensors"):
        kernel(a, a)
    with pytest.raises(TileTypeError, match=r"T\.const dims"):
        _eager_scale.compile(M=40, factor=3.0)


@tilelang.jit
def _eager_add_in_place(out, scale=1.0):
    out: T.Tensor[(4, 8), T.float32]
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(4, 8):
            out[i, j] = out[i, j] + scale


def test_eager_kernels_compile_ahead_from_a_tensor_prototype_by_name():
    # TileLang's kernel.compile(out=T.Tensor[(16, 16), T.float32]): the tensor's prototype, as
    # get_tir takes one (tile parsed the body with `out` bound to the prototype and failed)
    kernel = _eager_add_in_place.compile(out=T.Tensor[(4, 8), T.float32], scale=2.0)
    out = np.arange(32, dtype="float32").reshape(4, 8)
    expected = out + 2.0
    kernel(out)
    np.testing.assert_array_equal(out, expected)


def test_eager_kernels_give_their_source_for_named_dims():
    assert "T.prim_func" in _eager_scale.get_kernel_source(M=16, N=8, factor=2.0)


def test_eager_kernels_compile_for_a_calls_arguments():
    # TileLang's mHC examples: fn.get_kernel_source(tensors..., values...), then fn(the same)
    a = np.random.default_rng(2).standard_normal((24, 8)).astype("float32")
    assert "T.prim_func" in _eager_scale.get_kernel_source(a, 2.0)
    assert "T.prim_func" in _eager_scale.get_kernel_source(a, factor=2.0, kind="tir")
    kernel = _eager_scale.compile(a, 2.0)
    np.testing.assert_allclose(kernel(a), 2.0 * a, rtol=1e-6)
    assert kernel.kernel is _eager_scale.get_kernel(a, 2.0)  # the call's own compiled kernel


def test_t_bool_is_an_element_type():
    from tile.lang._src.dtypes import dtype_name

    assert dtype_name(T.bool) == "bool"


def test_profiler_do_bench_takes_tilelang_s_timing_options():
    kernel = tilelang.compile(_negate, out_idx=[-1], target="cpu")
    assert kernel.get_profiler().do_bench(backend="cupti", n_warmup=1, n_repeat=2) > 0
