"""Kernels a new user writes first, on every CUDA arch under the CPU emulator (issue 17).

Each case failed to compile or to run on some arch; each is compared with numpy.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.kernels import printing_copy

pytestmark = [
    pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler"),
    pytest.mark.emu,
]
ARCHS = ["sm_80", "sm_90a"]


def full_sum_kernel(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            xs = T.alloc_fragment((n,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[0:n], xs)
            T.reduce_sum(xs, s, dim=0)
            Y[0] = s[0]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_full_sum_of_a_1d_fragment(arch):
    kernel = tilelang.compile(full_sum_kernel(300), target={"kind": "cuda", "arch": arch})
    x = np.random.default_rng(3).standard_normal(300).astype("float32")
    y = np.zeros(1, "float32")
    kernel(x, y)
    np.testing.assert_allclose(y[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)


def printed_lines(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith("[block"))


@pytest.mark.parametrize("arch", ARCHS)
def test_print_is_a_device_printf_of_each_value_once(arch, capfd):
    kernel = tilelang.compile(printing_copy(), out_idx=[1], target={"kind": "cuda", "arch": arch})
    assert "printf(" in kernel.get_kernel_source("cuda")
    a = np.arange(8, dtype="float32") + 0.5
    np.testing.assert_array_equal(kernel(a), a)
    want = [f"[block ({b}, 0, 0)] tile: tile[{i}, {j}] = {a[b * 4 + i * 2 + j]:g}"
            for b in (0, 1) for i in (0, 1) for j in (0, 1)]
    want += [f"[block ({b}, 0, 0)] twice: A[bx * 4] * T.float32(2.0) = {2 * a[b * 4]:g}" for b in (0, 1)]
    assert printed_lines(capfd.readouterr().out) == sorted(want)


@pytest.mark.parametrize("arch", ARCHS)
def test_print_of_a_message_alone_is_one_printf_per_block(arch, capfd):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            T.print(msg="at 50% \"here\"")
            A[bx] = 1.0

    kernel = tilelang.compile(main, target={"kind": "cuda", "arch": arch})
    kernel(np.zeros(8, "float32"))
    assert printed_lines(capfd.readouterr().out) == [f'[block ({b}, 0, 0)] at 50% "here"' for b in (0, 1)]


def asserting_copy():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                T.device_assert(A[bx * 32 + i] >= 0.0, "A must be non-negative")
                B[bx * 32 + i] = A[bx * 32 + i]

    return main


def test_a_failed_device_assert_stops_the_kernel_naming_the_python_line(capfd):
    from tile.backends.cpu.simt import SimtFault

    kernel = tilelang.compile(asserting_copy(), out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    a = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a)
    a[40] = -1.0
    with open(__file__) as f:
        line = next(n for n, text in enumerate(f, 1) if "A must be non-negative" in text)
    with pytest.raises(SimtFault, match=rf"block \(1, 0, 0\): T.device_assert failed at {__file__}:{line}"):
        kernel(a)
    report = f"T.device_assert failed at {__file__}:{line}: A must be non-negative"
    assert f"[block (1, 0, 0) thread (8, 0, 0)] {report}" in capfd.readouterr().out


def row_copy_with_assumed_bound():
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            tid = T.get_thread_binding()
            for j in T.serial(N):
                T.assume(tid < M)
                B[tid, j] = A[tid, j] + 1.0

    return main


def test_a_dim_only_an_assume_reads_is_passed_to_the_kernel():
    # T.assume was the only reader of M; the kernel's flattened buffer sizes (M * N) still
    # named it, and CUDA code generation stopped at "Find undefined Variable M"
    kernel = tilelang.compile(row_copy_with_assumed_bound(), target={"kind": "cuda", "arch": "sm_90a"})
    a = np.arange(32 * 5, dtype="float32").reshape(32, 5)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1.0)
