"""The JIT surface TileLang's testing/python jit and kernel tests call, each checked against
numpy or a hand-computed result: ``JITKernel(func, out_idx=..., target=...)``,
``tilelang.transform.simplify.apply_simplify`` and the post-processing callbacks of
``tilelang.engine.callback``."""

from __future__ import annotations

import numpy as np
import pytest
import tvm  # type: ignore[import-untyped]

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.backend import resolve_target
from tile.ir.errors import TileError
from tile.ir.gpu.source_hooks import set_source_hook
from tile.lang import JITKernel
from tile.lang._src.cache import kernel_key
from tile.lang.autotuner import autotune
from tile.lang.engine.callback import (
    CallbackError,
    register_cuda_postproc_callback,
    register_hip_postproc_callback,
)
from tile.lang.transform import simplify_prim_func
from tile.lang.transform.simplify import apply_simplify
from tile.testsupport.markers import needs_backend


def _affine(n: int):
    @T.prim_func
    def affine(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(n):
                B[i] = A[i] * 2.0 + 1.0

    return affine


def test_jitkernel_constructor_compiles_like_compile():
    a = np.arange(8, dtype=np.float32)
    by_keyword = JITKernel(_affine(8), out_idx=[-1], target="cpu")
    by_position = JITKernel(_affine(8), [1], target="cpu")  # TileLang's second parameter: out_idx
    assert isinstance(by_keyword, JITKernel)
    np.testing.assert_array_equal(by_keyword(a), 2 * a + 1)
    np.testing.assert_array_equal(by_position(a), 2 * a + 1)
    b = np.zeros(8, dtype=np.float32)
    JITKernel(_affine(8), target="cpu")(a, b)  # no out_idx: the output is passed
    np.testing.assert_array_equal(b, [1, 3, 5, 7, 9, 11, 13, 15])


def test_jitkernel_constructor_needs_a_kernel():
    with pytest.raises(TileError, match="needs the kernel"):
        JITKernel()
    with pytest.raises(TileError, match=r"@T\.prim_func"):
        JITKernel(lambda x: x, target="cpu")


def _scale_unused_bias(n):
    @T.prim_func
    def scale(
        A: T.Tensor((n,), "float32"),
        Bias: T.Tensor((n,), "float32"),
        C: T.Tensor((n,), "float32"),
        s: T.float32,
    ):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(n):
                C[i] = A[i] * s

    return scale


def test_apply_simplify_drops_the_tensor_parameters_the_kernel_never_uses():
    simplified = apply_simplify(_scale_unused_bias(16))
    assert [str(p.name) for p in simplified.params] == ["A", "C", "s"]  # Bias dropped, the scalar kept
    a = np.linspace(-1, 1, 16, dtype=np.float32)
    out = tilelang.compile(simplified, out_idx=[1], target="cpu")(a, 3.0)  # called without Bias
    np.testing.assert_allclose(out, a * 3, rtol=0, atol=1e-6)
    assert apply_simplify(tvm.IRModule({"scale": _scale_unused_bias(4)})).params[1].name == "C"
    used = _affine(8)
    assert apply_simplify(used).same_as(used)  # nothing unused: the kernel itself
    with pytest.raises(TypeError, match="prim_func kernel or an IRModule"):
        apply_simplify(lambda: None)


def test_a_tensor_that_alone_gives_a_used_symbolic_dim_is_kept():
    m = T.dynamic("m")

    @T.prim_func
    def size_of(A: T.Tensor((m,), "float32"), B: T.Tensor((4,), "float32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                C[i] = T.cast(m, "float32")

    assert [str(p.name) for p in apply_simplify(size_of).params] == ["A", "C"]


def test_simplify_prim_func_drops_unused_tensors_of_the_built_kernel():
    built = simplify_prim_func(_scale_unused_bias)
    assert built.__name__ == "_scale_unused_bias"
    kernel = tilelang.compile(built(8), target="cpu")
    a = np.arange(8, dtype=np.float32)
    c = np.zeros(8, dtype=np.float32)
    kernel(a, c, 0.5)
    np.testing.assert_array_equal(c, a / 2)


# ------------------------------------------------------------------ engine.callback


@pytest.fixture
def no_source_hooks():
    yield
    for language in ("cuda", "hip"):
        set_source_hook(language, None)


def _times(n: int, factor: float):
    @T.prim_func
    def times(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as _:
            for i in T.Parallel(n):
                B[i] = A[i] * factor

    return times


EMU_SM80 = {"kind": "cuda", "arch": "sm_80"}


@needs_backend("cuda")
def test_cuda_postproc_callback_rewrites_the_source_the_emulator_runs(monkeypatch, tmp_path, no_source_hooks):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    calls = []

    @register_cuda_postproc_callback
    def triple_instead(code, target):
        calls.append(target.arch)
        assert "0x1p+1f" in code  # the factor 2.0 as the CUDA generator spells it
        return "// rewritten by the test\n" + code.replace("0x1p+1f", "0x1.8p+1f")

    a = np.arange(32, dtype=np.float32)
    kernel = tilelang.compile(_times(32, 2.0), out_idx=[-1], target=EMU_SM80)
    assert calls == ["sm_80"]
    assert kernel.get_kernel_source().startswith("// rewritten by the test\n")
    np.testing.assert_array_equal(kernel(a), 3 * a)  # the emulator ran the rewritten source

    again = tilelang.compile(_times(32, 2.0), out_idx=[-1], target=EMU_SM80)
    assert calls == ["sm_80"]  # the same callback: the cached kernel, not called again
    np.testing.assert_array_equal(again(a), 3 * a)

    target, manifest = resolve_target(EMU_SM80)
    key = kernel_key(_times(32, 2.0), [1], target, manifest, {})

    @register_cuda_postproc_callback
    def stamp_only(code, target):
        return "// stamp\n" + code

    assert kernel_key(_times(32, 2.0), [1], target, manifest, {}) != key  # another callback, another kernel
    set_source_hook("cuda", None)
    assert kernel_key(_times(32, 2.0), [1], target, manifest, {}) not in (key, None)


def test_callback_registration_errors(no_source_hooks):
    from tile.ir.errors import BackendError
    from tile.ir.gpu.source_hooks import postprocess_source
    from tile.ir.target import Target

    register_hip_postproc_callback(lambda code, target: 42)
    with pytest.raises(BackendError, match="returned int, not the source text"):
        postprocess_source("hip", "code", Target(kind="hip"))
    with pytest.raises(CallbackError, match="already registered"):

        @register_hip_postproc_callback(override=False)
        def second(code, target):
            return code

    with pytest.raises(CallbackError, match="takes a function"):
        register_cuda_postproc_callback(False)("not callable")
    assert postprocess_source("cuda", "unchanged", Target(kind="cuda", arch="sm_80")) == "unchanged"


# ------------------------------------------------------------------ @autotune call forms


def _make_scaled(compiled: list):
    @autotune(configs=[{"threads": 32}, {"threads": 64}], do_not_specialize=["scale"], warmup=1, rep=2)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def scaled(n, scale=2.0, threads=64):
        compiled.append((n, scale, threads))

        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
                for i in T.Parallel(threads):
                    if bx * threads + i < n:
                        B[bx * threads + i] = A[bx * threads + i] * scale

        return main

    return scaled


def test_a_fixed_tuned_parameter_compiles_as_asked_and_is_kept_per_key(monkeypatch, tmp_path):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    compiled: list = []
    scaled = _make_scaled(compiled)
    a = np.arange(100, dtype=np.float32)

    first = scaled(100, 2.0, threads=32)  # threads fixed by the call: no tuning
    assert compiled == [(100, 2.0, 32)] and len(scaled._tuner_cache) == 1
    np.testing.assert_array_equal(first(a), 2 * a)
    # scale is in do_not_specialize: the kernel of the first call is reused, as in TileLang
    assert scaled(100, 3.0, threads=32) is first and scaled(n=100, scale=5.0, threads=32) is first
    assert len(compiled) == 1
    other = scaled(100, 2.0, threads=64)  # another tuned value: another kernel
    assert compiled[-1] == (100, 2.0, 64) and len(scaled._tuner_cache) == 2
    np.testing.assert_array_equal(other(a), 2 * a)
    assert scaled(100, 2.0, threads=64, __return_kernel=True) is other


def test_return_kernel_gives_an_eager_kernel_instead_of_its_outputs(monkeypatch, tmp_path):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))

    @autotune(configs=[{"block": 16}, {"block": 32}], warmup=1, rep=2, ref_prog=lambda A: A + 1.0)
    @tilelang.jit(target="cpu")
    def plus_one(A, block: int = 16):
        n = T.const("n")
        A: T.Tensor((n,), "float32")
        B = T.empty((n,), "float32")
        with T.Kernel(n // block, threads=block) as bx:
            part = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], part)
            for i in T.Parallel(block):
                part[i] = part[i] + 1.0
            T.copy(part, B[bx * block])
        return B

    a = np.linspace(0, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(plus_one(a), a + 1)  # a call runs the tuned kernel
    kernel = plus_one(a, __return_kernel=True)
    assert kernel.config in ({"block": 16}, {"block": 32})
    np.testing.assert_allclose(kernel(a), a + 1)
    fixed = plus_one(a, block=16, __return_kernel=True)  # a fixed tuned parameter: compiled as asked
    np.testing.assert_allclose(fixed(a), a + 1)


@needs_backend("cuda")
def test_a_bare_cuda_target_on_the_emulator_takes_the_arch_of_tile_default_target(monkeypatch):
    from tile.lang._src.jit import _pick_target  # what compile, jit, JITKernel and AutoTuner resolve with

    monkeypatch.setattr("tile.backends.cuda._src.backend._device_arch", lambda: "sm_86")
    monkeypatch.setenv("TILE_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_90a"}')
    monkeypatch.setenv("TILE_DEVICE", "emu")
    assert _pick_target("cuda")[0].arch == "sm_90a"  # the GPU the emulator plays
    assert _pick_target("auto")[0].arch == "sm_90a"
    assert _pick_target({"kind": "cuda", "arch": "sm_80"})[0].arch == "sm_80"  # an explicit arch wins
    assert _pick_target("cpu")[0].kind == "cpu"
    monkeypatch.delenv("TILE_DEVICE")  # a real GPU: "cuda" is that GPU's arch
    assert _pick_target("cuda")[0].arch == "sm_86"
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_DEFAULT_TARGET", "cpu")  # another kind: "cuda" keeps the backend's default
    assert _pick_target("cuda")[0].arch == "sm_86"


# ------------------------------------------------------------------ fast-math intrinsics

FAST_NAMES = ["__exp", "__exp10", "__log", "__log2", "__log10", "__tan", "__cos", "__sin"]


@T.prim_func
def _all_fast_math(
    A: T.Tensor((32,), "float32"), H: T.Tensor((32,), "float16"), B: T.Tensor((8, 32), "float32")
):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            B[0, i] = T.__exp(A[i]) + T.cast(T.__exp(H[i]), "float32")  # float16 through float32
            B[1, i] = T.__exp10(A[i])
            B[2, i] = T.__log(A[i])
            B[3, i] = T.__log2(A[i])
            B[4, i] = T.__log10(A[i])
            B[5, i] = T.__tan(A[i])
            B[6, i] = T.__cos(A[i])
            B[7, i] = T.__sin(A[i])


def _fast_math_reference(a):
    h = a.astype(np.float16).astype(np.float32)
    logs = [np.log(a), np.log2(a), np.log10(a)]
    return np.stack([np.exp(a) + np.exp(h), 10.0**a, *logs, np.tan(a), np.cos(a), np.sin(a)])


@pytest.mark.parametrize("target", ["cpu", pytest.param("emu", marks=needs_backend("cuda"))])
def test_fast_math_names_call_the_gpu_intrinsics_and_compute_their_functions(target, monkeypatch):
    source_of_intrinsics = target == "emu"
    if target == "emu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
        monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
        target = {"kind": "cuda", "arch": "sm_80"}
    kernel = tilelang.compile(_all_fast_math, out_idx=[2], target=target)
    a = np.linspace(0.1, 1.4, 32, dtype=np.float32)
    out = kernel(a, a.astype(np.float16))
    # the emulator computes the intrinsics precisely; on a GPU they are CUDA's approximations
    np.testing.assert_allclose(out, _fast_math_reference(a), rtol=2e-3)
    source = kernel.get_kernel_source()
    for name in FAST_NAMES:
        assert (f"{name}f(" in source) == source_of_intrinsics, name  # the CPU: the precise functions


def test_fast_math_on_float64_is_the_precise_function():
    from tvm import tirx as tir

    x = tir.Var("x", "float64")
    assert "call_pure_extern" not in str(T.__exp(x)) and "exp" in str(T.__exp(x))
    assert "__sinf" in str(T.__sin(tir.Var("y", "float32")))
