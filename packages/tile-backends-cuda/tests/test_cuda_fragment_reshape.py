"""``T.reshape`` of a fragment: a view of the same registers, on the CPU, CUDA and ROCm.

Layout inference gives a reshape of a fragment the fragment's own layout reshaped
(``Fragment.reshape``): each element of the view is on the thread, and in the register,
that holds the element at the same row-major position of the fragment. Uses that place
the two on different threads, and views with another element type, are typed errors
that say why. Kernels run on the CPU backend and under the emulator as CUDA sm_80 and
ROCm gfx90a, against numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _emu_targets import TARGETS, compile_for

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import LayoutInferenceError, TileTypeError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
ALL_TARGETS = [pytest.param({"kind": "cpu"}, id="cpu"), *TARGETS]


def row_max_of_flat_tile(threads: int) -> Any:
    """A 1-d fragment of 1024 elements reshaped to (32, 32); the maximum of each row."""

    @T.prim_func
    def main(A: T.Tensor((1024,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((1024,), "float32")
            R = T.alloc_fragment((32,), "float32")
            T.copy(A, F)
            V = T.reshape(F, [32, 32])
            T.reduce_max(V, R, dim=1)
            T.copy(R, B)

    return main


def flattened_update(rows: int, cols: int, threads: int) -> Any:
    """A (rows, cols) fragment written through its flat reshape, then copied out as itself."""
    n = rows * cols

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, F)
            V = T.reshape(F, [n])
            for i in T.Parallel(n):
                V[i] = V[i] * 2.0 + T.cast(i, "float32")
            T.copy(F, B)

    return main


def group_sums(rows: int, cols: int, group: int, threads: int) -> Any:
    """A (rows, cols) fragment, its last dim split into groups of ``group``: each group's sum."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows * cols // group,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((rows, cols), "float32")
            S = T.alloc_fragment((rows * cols // group,), "float32")
            T.copy(A, F)
            for i, j in T.Parallel(rows, cols):
                F[i, j] = F[i, j] + 1.0
            V = T.reshape(F, [rows * cols // group, group])
            T.reduce_sum(V, S, dim=1)
            T.copy(S, B)

    return main


def _data(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("target", ALL_TARGETS)
@pytest.mark.parametrize("threads", [32, 128])
def test_row_max_of_reshaped_flat_fragment(target: dict[str, str], threads: int) -> None:
    """The reduction read other threads' registers past the local array before (it faulted)."""
    a = _data(1024)
    kernel = compile_for(row_max_of_flat_tile(threads), target)
    np.testing.assert_array_equal(kernel(a), a.reshape(32, 32).max(axis=1))


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_writes_through_flat_reshape_reach_the_fragment(target: dict[str, str]) -> None:
    a = _data(16, 32)
    kernel = compile_for(flattened_update(16, 32, 64), target)
    expected = (a.reshape(-1) * 2 + np.arange(512, dtype=np.float32)).reshape(16, 32)
    np.testing.assert_allclose(kernel(a), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_reduce_over_split_last_dim(target: dict[str, str]) -> None:
    a = _data(32, 16)
    kernel = compile_for(group_sums(32, 16, 4, 128), target)
    np.testing.assert_allclose(kernel(a), (a + 1).reshape(-1, 4).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_view_of_a_fragment_with_another_dtype_is_refused() -> None:
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((32,), "float32")
            T.copy(A, F)
            H = T.view(F, [64], dtype="float16")
            T.copy(H, B)

    with pytest.raises(TileTypeError, match="views the fragment F") as info:
        tilelang.compile(main, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    assert "same element type" in str(info.value)


def test_reshape_whose_uses_place_elements_on_other_threads_is_a_layout_error() -> None:
    """Two tensor-core accumulators: the (32, 32) one and its (16, 64) reshape each need
    their own mma layout, which puts elements at the same position on different threads."""

    @T.prim_func
    def main(
        A: T.Tensor((32, 16), "float16"),
        B: T.Tensor((16, 32), "float16"),
        D: T.Tensor((16, 16), "float16"),
        E: T.Tensor((16, 64), "float16"),
        C: T.Tensor((32, 32), "float32"),
    ):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((32, 16), "float16")
            b = T.alloc_shared((16, 32), "float16")
            d = T.alloc_shared((16, 16), "float16")
            e = T.alloc_shared((16, 64), "float16")
            F = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(D, d)
            T.copy(E, e)
            T.clear(F)
            T.gemm(a, b, F)
            V = T.reshape(F, [16, 64])
            T.gemm(d, e, V)
            T.copy(F, C)

    with pytest.raises(LayoutInferenceError, match=r"T\.reshape of the fragment F") as info:
        tilelang.compile(main, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    assert "T.copy F into a new fragment" in str(info.value)
