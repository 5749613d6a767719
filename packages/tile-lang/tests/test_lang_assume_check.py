"""``T.assume`` over symbolic dims and scalars is checked before each call (TileLang's run-time
check of a host-evaluable assume); other assumptions stay compile-time hints."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import KernelArgumentError, KernelAssumptionError
from tile.testsupport.markers import needs_host_cxx


def line_of(func, text: str) -> int:
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(lines) if text in line)


def fill_multiple_of_four():
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32):
            T.assume(N % 4 == 0)
            for i in T.serial(N):
                A[i] = T.float32(i)

    return main


def test_a_call_that_breaks_the_assumption_is_refused_at_its_line():
    kernel = tilelang.compile(fill_multiple_of_four(), target="cpu")
    good = np.zeros(8, "float32")
    kernel(good)
    np.testing.assert_array_equal(good, np.arange(8, dtype="float32"))
    bad = np.full(6, -1.0, "float32")
    with pytest.raises(KernelAssumptionError) as info:
        kernel(bad)
    message = str(info.value)
    assert "Assume: N % 4 == 0" in message and "N = 6" in message
    assert info.value.location.filename == __file__
    assert info.value.location.line == line_of(fill_multiple_of_four, "T.assume(")
    assert (bad == -1.0).all()  # refused before the kernel ran
    # TileLang's type, and tile's argument-error family
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, KernelArgumentError)
    kernel(np.zeros(12, "float32"))  # a later good size still runs


def test_torch_tensors_are_checked_too():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(fill_multiple_of_four(), target="cpu")
    a = torch.zeros(4)
    kernel(a)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="Assume: N % 4 == 0"):  # TileLang's own test's check
        kernel(torch.empty(2))


def clamp_prefix(n_max: int = 64):
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), count: T.int32):
        with T.Kernel(1, threads=32):
            T.assume(count >= 0 and count <= N)
            for i in T.serial(count):
                A[i] = T.float32(1)

    return main


def test_an_assumption_on_a_scalar_is_checked_on_every_call():
    kernel = tilelang.compile(clamp_prefix(), target="cpu")
    a = np.zeros(8, "float32")
    kernel(a, 3)
    assert a.tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    for count in (9, -1):  # same shapes as the call that passed: the scalar alone breaks it
        with pytest.raises(KernelAssumptionError, match=rf"count = {count}, N = 8|N = 8, count = {count}"):
            kernel(a, count)
    kernel(a, np.int64(8))  # numpy integers are read as the ints they are
    assert (a == 1).all()


def static_size(n: int):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=32):
            T.assume(n % 4 == 0)
            for i in T.serial(n):
                A[i] = T.float32(2)

    return main


def test_static_sizes_that_satisfy_it_cost_nothing_and_those_that_do_not_are_refused():
    kernel = tilelang.compile(static_size(8), target="cpu")
    assert kernel._assumptions == []  # folded to a true constant: nothing to check per call
    a = np.zeros(8, "float32")
    kernel(a)
    assert (a == 2).all()
    broken = tilelang.compile(static_size(6), target="cpu")
    for _ in range(2):  # every call, not only the first (the fast path is off for it)
        with pytest.raises(KernelAssumptionError, match="does not hold for any arguments"):
            broken(np.zeros(6, "float32"))


def thread_dependent():
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=32):
            x = T.alloc_var(T.int32)
            x = A[0]
            T.assume(x >= 0 and x < N)  # reads a loaded value: a hint only
            out[0] = A[x]

    return main


def test_an_assumption_on_a_loaded_value_stays_a_hint():
    kernel = tilelang.compile(thread_dependent(), target="cpu")
    assert kernel._assumptions == []
    out = np.zeros(1, "int32")
    kernel(np.array([2, 5, 7, 9], "int32"), out)
    assert out[0] == 7


@needs_host_cxx
@pytest.mark.parametrize("target", [{"kind": "cuda", "arch": "sm_80"}, {"kind": "hip", "arch": "gfx90a"}],
                         ids=["cuda-emu", "rocm-emu"])
def test_gpu_kernels_check_it_before_the_launch(monkeypatch, target):
    pytest.importorskip(f"tile.backends.{'cuda' if target['kind'] == 'cuda' else 'rocm'}")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(fill_multiple_of_four(), target=target)
    a = np.zeros(8, "float32")
    kernel(a)  # learns this signature's launch plan
    np.testing.assert_array_equal(a, np.arange(8, dtype="float32"))
    kernel(a)  # the same signature again: the per-signature path
    with pytest.raises(KernelAssumptionError, match="N = 10"):
        kernel(np.zeros(10, "float32"))


def test_integer_division_follows_tvm_floor_and_truncating_forms():
    """The host closure against hand-computed values: TVM's ``//`` and ``%`` round toward
    negative infinity (Python's), ``truncdiv`` and ``truncmod`` toward zero (C's)."""
    from tvm import tirx

    from tile.lang._src.assumptions import _closure

    n = tirx.Var("n", "int32")
    known = {"n": n}
    cases = {
        tirx.FloorDiv(n, 2): {-7: -4, 7: 3},
        tirx.FloorMod(n, 2): {-7: 1, 7: 1},
        tirx.Div(n, 2): {-7: -3, 7: 3},
        tirx.Mod(n, 2): {-7: -1, 7: 1},
        tirx.Min(n, 3): {-7: -7, 7: 3},
        tirx.Max(n, 3): {-7: 3, 7: 7},
    }
    for expr, values in cases.items():
        closure = _closure(expr, known, [])
        for value, want in values.items():
            assert closure({"n": value}) == want, (expr, value)
