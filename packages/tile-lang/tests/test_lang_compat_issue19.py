"""TileLang names added for issue 19's coverage table: the ``tir`` submodule TileLang programs
import from, and the example-failure causes docs/compat.md lists. Each is checked against an
independent reference (TVM's own objects, numpy, hand-computed cases)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tvm import tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu.simt.errors import SimtDeadlockError
from tile.ir.errors import TargetError, UnsupportedOnTargetError
from tile.lang.errors import TileTypeError
from tile.testsupport.markers import needs_backend, needs_cuobjdump, needs_nvcc

RNG = np.random.default_rng(1919)


def test_language_tir_submodules_reexport_tvms_builders():
    from tile.lang.language.tir import ir as tir_ir
    from tile.lang.language.tir import op as tir_op

    assert tir_ir.Shuffle is tirx.Shuffle
    assert "Shuffle" in tir_ir.__all__
    assert "dp4a" in tir_op.__all__
    vector = tirx.Var("v", "float16x2")
    lane = tir_op.Shuffle([vector], [1])
    assert lane.vectors[0].same_as(vector) and lane.indices[0].value == 1


def _expecting(tx_bytes: int):
    @T.prim_func
    def kernel(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            bar = T.alloc_barrier(16)
            tx = T.get_thread_binding(0)
            if tx == 0:
                T.mbarrier_expect_tx(bar[0], tx_bytes)
            T.mbarrier_arrive(mbarrier=bar[0])  # TileLang's keywords
            T.mbarrier_wait_parity(mbarrier=bar[0], parity=0)
            B[tx] = A[15 - tx] + 1.0

    return kernel


@needs_backend("cuda")
def test_mbarrier_expect_tx_holds_the_phase_for_its_bytes_on_the_emulator(monkeypatch):
    # PTX: a phase completes when its pending arrivals AND its tx-count reach zero. With no
    # bytes expected the 16 arrivals complete it; 64 expected bytes that nothing delivers keep
    # it open, which the emulator reports as a deadlock.
    monkeypatch.setenv("TILE_DEVICE", "emu")
    target = {"kind": "cuda", "arch": "sm_90a"}
    a = np.arange(16, dtype="float32")
    released = tilelang.compile(_expecting(0), out_idx=[-1], target=target)
    np.testing.assert_array_equal(released(a), a[::-1] + 1)
    with pytest.raises(SimtDeadlockError):
        tilelang.compile(_expecting(64), out_idx=[-1], target=target)(a)


@needs_nvcc
@needs_cuobjdump
@needs_backend("cuda")
def test_mbarrier_expect_tx_is_ptx_expect_tx_under_nvcc():
    kernel = tilelang.compile(_expecting(64), target={"kind": "cuda", "arch": "sm_90a"})
    assert "tile_mbarrier_expect_tx(" in kernel.get_kernel_source("cuda")
    sass = kernel.get_kernel_source("sass")
    # expect-tx is an arrive op with no arrival (A0) that adds to the tx-count (TR), guarded by
    # tx == 0; each thread's own arrive is A1T0 (one arrival, no bytes).
    assert "@!P0 SYNCS.ARRIVE.TRANS64.RED.A0TR" in " ".join(sass.split())
    assert "SYNCS.ARRIVE.TRANS64.A1T0" in sass


@T.macro
def _add_ten(x: T.Ref):
    x = x + 10.0  # a store through the reference


@T.macro(hygienic=False)  # resolves _collatz at use time: the macro calls itself
def _collatz(n, var: T.Ref[T.int32]):
    if n == 1:
        pass
    elif n % 2 == 0:
        var = var // 2
        _collatz(n // 2, var)
    else:
        var = var * 3 + 1
        _collatz(n * 3 + 1, var)


def test_ref_parameters_store_through_to_the_element():
    @T.prim_func
    def refs(A: T.Tensor((2, 4), "float32"), C: T.Tensor((3,), "int32")):
        with T.Kernel(1, threads=1):
            i = T.alloc_var("int32", init=3)
            _add_ten(A[1, 2])  # constant indices
            _add_ten(A[0, i])  # a variable index
            _add_ten(A[0, i])
            j = T.alloc_var("float32", init=1.5)
            _add_ten(j)  # a T.alloc_var
            A[1, 0] = j
            for k in T.serial(3):
                _collatz(6, C[k])  # nested calls pass the reference on

    a = RNG.standard_normal((2, 4)).astype("float32")
    c = np.array([100, 7, -9], dtype="int32")
    want_a = a.copy()
    want_a[1, 2] += 10
    want_a[0, 3] += 20
    want_a[1, 0] = 11.5
    want_c = [int(v) for v in c]
    n = 6  # the macro's Python-level recursion on n, applied to each value by hand
    while n != 1:
        want_c = [v // 2 for v in want_c] if n % 2 == 0 else [v * 3 + 1 for v in want_c]
        n = n // 2 if n % 2 == 0 else 3 * n + 1
    tilelang.compile(refs, target="cpu")(a, c)
    np.testing.assert_allclose(a, want_a, rtol=1e-6)
    np.testing.assert_array_equal(c, want_c)


def test_a_ref_parameter_needs_an_element():
    with pytest.raises(TileTypeError, match=r"is a T\.Ref"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                _add_ten(A[0] + 1.0)


@T.prim_func
def _doubled(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(32):
            B[bx * 32 + i] = A[bx * 32 + i] * 2.0


def test_jit_kernel_run_once_runs_on_supplied_inputs():
    kernel = tilelang.compile(_doubled, out_idx=[1], target="cpu")
    seen = []

    def call(a):
        seen.append(np.asarray(a).copy())
        return kernel(a)

    out = kernel.run_once(call)
    assert len(seen) == 1 and seen[0].shape == (64,)
    np.testing.assert_array_equal(np.asarray(out), seen[0] * 2)
    np.testing.assert_array_equal(np.asarray(kernel.run_once()), seen[0] * 2)  # same inputs each time


@T.prim_func
def _fetch_add(A: T.Tensor((2,), "int32"), F: T.Tensor((1,), "float32"), Old: T.Tensor((2, 64), "float32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            Old[0, i] = T.cast(T.atomic_add(A[0], 1, return_prev=True), "float32")
            Old[1, i] = T.atomic_add(F[0], 0.5, return_prev=True)
            T.atomic_max(A[1], i * 3, return_prev=True)


@pytest.mark.parametrize(
    "target",
    [pytest.param("cpu", id="cpu"),
     pytest.param({"kind": "cuda", "arch": "sm_80"}, marks=needs_backend("cuda"), id="sm_80")],
)  # fmt: skip
def test_atomic_add_return_prev_gives_each_thread_a_distinct_old_value(monkeypatch, target):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_fetch_add, target=target)
    a, f, old = np.array([0, -5], "int32"), np.zeros(1, "float32"), np.zeros((2, 64), "float32")
    kernel(a, f, old)
    old, old_f = old
    # 64 serialised increments: the old values are 0..63 in some order, the total is 64
    assert sorted(old.tolist()) == [float(k) for k in range(64)] and a[0] == 64
    assert sorted(old_f.tolist()) == [0.5 * k for k in range(64)] and f[0] == 32.0
    assert a[1] == 63 * 3


def test_return_prev_of_a_max_on_float64_is_refused():
    with pytest.raises(TileTypeError, match="float64: GPUs fetch the old value of a max"):

        @T.prim_func
        def double_max(A: T.Tensor((2,), "float64"), Old: T.Tensor((4,), "float64")):
            with T.Kernel(1, threads=4):
                for i in T.Parallel(4):
                    Old[i] = T.atomic_max(A[0], 1.0, return_prev=True)


def test_element_types_are_their_names_and_still_construct():
    torch = pytest.importorskip("torch")
    assert getattr(torch, T.float16) is torch.float16  # TileLang tests write getattr(torch, dtype)
    assert T.bfloat16 == "bfloat16" and {T.float32: 1}["float32"] == 1
    assert T.float32(1.5).value == 1.5 and str(T.int8(3).ty.dtype) == "int8"
    assert isinstance(T.int32(), tirx.Var)  # a declared variable, as TVMScript's T.int32()

    @T.prim_func
    def scaled(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32), s: T.int32):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] * T.float32(s)

    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    tilelang.compile(scaled, target="cpu")(a, b, 3)
    np.testing.assert_array_equal(b, a * 3)


def _flagged(flags):
    @T.prim_func
    def flagged(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        T.annotate_compile_flags(flags)
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] + 1.0

    return flagged


@needs_nvcc
@needs_backend("cuda")
def test_annotated_compile_flags_reach_the_device_compiler():
    # tile compiles with --use_fast_math, which flushes denormals (add.ftz.f32); a later
    # --ftz=false keeps them (add.f32), visible in the PTX
    target = {"kind": "cuda", "arch": "sm_80"}
    plain = tilelang.compile(_doubled, target=target).get_kernel_source("ptx")
    assert "mul.ftz.f32" in plain or "add.ftz.f32" in plain
    ptx = tilelang.compile(_flagged(["--ftz=false"]), target=target).get_kernel_source("ptx")
    assert re.search(r"\badd\.f32", ptx) and ".ftz." not in ptx
    ptx = tilelang.compile(_flagged("--ftz=true"), target=target).get_kernel_source("ptx")
    assert "add.ftz.f32" in ptx  # a string is one flag; other flags, another cache entry


def test_compile_flags_on_the_cpu_are_refused_at_the_annotation():
    with pytest.raises(UnsupportedOnTargetError, match="takes no device compiler flags") as info:
        tilelang.compile(_flagged(["-O3"]), target="cpu")
    assert "T.annotate_compile_flags(flags)" in str(info.value)
    with pytest.raises(TargetError, match="a flag or a list of flags"):
        _flagged([3])
