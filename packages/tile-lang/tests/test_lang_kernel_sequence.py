"""A ``@T.prim_func`` with several ``T.Kernel`` blocks in turn and function-scope
``T.alloc_global`` scratch (split-K decoding's shape: partial results, then a combine),
checked against numpy on the CPU and on the CUDA emulator; and ``T.clear``/``T.fill`` of
a single element (a ``T.alloc_var``)."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang._src.kernel_sequence import KernelSequence
from tile.testsupport.markers import needs_host_cxx

ROWS, COLS, SPLITS = 4, 64, 4


def split_row_sums():
    """Out[r] = sum of A[r, :], in SPLITS partial sums per row (first kernel) and a combine (second)."""
    chunk = COLS // SPLITS

    @T.prim_func
    def row_sums(A: T.Tensor((ROWS, COLS), "float32"), Out: T.Tensor((ROWS,), "float32")):
        partial = T.alloc_global((ROWS, SPLITS), "float32")
        with T.Kernel(ROWS, SPLITS, threads=32) as (r, s):
            tile = T.alloc_fragment((chunk,), "float32")
            acc = T.alloc_fragment((1,), "float32")
            T.copy(A[r, s * chunk : (s + 1) * chunk], tile)
            T.reduce_sum(tile, acc, dim=0)
            partial[r, s] = acc[0]
        with T.Kernel(ROWS, threads=32) as r:
            total = T.alloc_var("float32")
            T.clear(total)
            for s in T.serial(SPLITS):
                total += partial[r, s]
            Out[r] = total

    return row_sums


def two_launches():
    """The second kernel reads what the first wrote: B = 2 * A, then B += 1, no scratch."""

    @T.prim_func
    def twice(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * 2.0
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = B[bx * 64 + i] + 1.0

    return twice


def scratch_in_one_kernel(alloc=T.alloc_global):
    """One kernel, function-scope scratch: A goes through C into B."""

    @T.prim_func
    def through(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        C = alloc((128,), "float32")
        with T.Kernel(2, threads=64) as bx:
            T.copy(A[bx * 64 : (bx + 1) * 64], C[bx * 64 : (bx + 1) * 64])
            T.copy(C[bx * 64 : (bx + 1) * 64], B[bx * 64 : (bx + 1) * 64])

    return through


def _targets():
    return ["cpu", pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a-emu")]


@pytest.mark.parametrize("target", _targets())
def test_partials_in_scratch_then_a_combine(monkeypatch, target):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(split_row_sums(), out_idx=[-1], target=target)
    assert isinstance(kernel, KernelSequence) and len(kernel.kernels) == 2
    assert [p.name for p in kernel.params] == ["A", "Out"]  # the scratch is not a parameter to pass
    a = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)
    out = kernel(a)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_kernels_run_in_program_order():
    kernel = tilelang.compile(two_launches(), target="cpu")
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, dtype=np.float32)
    assert kernel(a, b) is None
    np.testing.assert_array_equal(b, 2 * a + 1)
    assert kernel.get_kernel_source("tir").count("def twice_kernel") == 2


@pytest.mark.parametrize("alloc", [T.alloc_global, T.alloc_buffer], ids=["alloc_global", "alloc_buffer"])
def test_scratch_of_a_single_kernel_is_allocated_per_call(alloc):
    kernel = tilelang.compile(scratch_in_one_kernel(alloc), out_idx=[1], target="cpu")
    a = np.linspace(-1, 1, 128, dtype=np.float32)
    np.testing.assert_array_equal(kernel(a), a)
    np.testing.assert_array_equal(kernel(2 * a), 2 * a)


def test_profiler_of_a_sequence_checks_against_a_reference():
    kernel = tilelang.compile(split_row_sums(), out_idx=[-1], target="cpu")
    kernel.get_profiler().assert_allclose(lambda a: a.sum(-1), rtol=1e-4, atol=1e-4)


def test_fill_of_a_single_element():
    @T.prim_func
    def elements(A: T.Tensor((8,), "float32"), B: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=1):
            v = T.alloc_var("float32")
            w = T.alloc_local((2,), "int32")
            T.clear(v)
            T.fill(w[1], 5)
            for i in T.serial(8):
                v += A[i]
            B[0] = v
            B[1] = T.Cast("float32", w[1])
            T.fill(B[2], v * 2.0)

    kernel = tilelang.compile(elements, target="cpu")
    a = np.arange(8, dtype=np.float32)
    b = np.full(3, 7.0, dtype=np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, [28.0, 5.0, 56.0])


@tilelang.jit
def two_steps_with_named_shapes(x, y, z, threads=128):
    # TileLang's fused MoE: `input_shape = (num_tokens, dhidden)` before two T.Kernel blocks
    # made function-scope scalars, and the kernels were taken for one (256 x 256 threads)
    n = T.const("n")
    shape = (n,)
    x: T.Tensor(shape, T.float32)
    y: T.Tensor(shape, T.float32)
    z: T.Tensor(shape, T.float32)
    with T.Kernel(T.ceildiv(n, 128), threads=threads) as bx:
        for i in T.Parallel(128):
            y[bx * 128 + i] = x[bx * 128 + i] + 1.0
    with T.Kernel(T.ceildiv(n, 128), threads=threads) as bx:
        for i in T.Parallel(128):
            z[bx * 128 + i] = y[bx * 128 + i] * 2.0


@pytest.mark.parametrize("emu", [False, pytest.param(True, marks=needs_host_cxx)])
def test_function_scope_names_go_with_each_kernel(monkeypatch, emu):
    if emu:
        pytest.importorskip("tile.backends.cuda")
        monkeypatch.setenv("TILE_DEVICE", "emu")
        monkeypatch.setenv("TILE_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_80"}')
    kernel = two_steps_with_named_shapes.compile(n=256)
    x = np.arange(256, dtype="float32")
    y, z = np.zeros(256, "float32"), np.zeros(256, "float32")
    kernel(x, y, z)
    np.testing.assert_array_equal(z, (x + 1.0) * 2.0)
