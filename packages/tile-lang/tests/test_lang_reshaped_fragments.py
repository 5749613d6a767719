"""A fragment indexed as the ``T.Parallel`` nest reshaped (``B_local[i * N + j]`` over
``T.Parallel(M, N)`` on an ``(M * N,)`` fragment: TileLang's
testing/python/language/test_tilelang_language_composable_index.py).

Before: layout inference read such an index as no index of the nest, so the flat fragment kept
the layout of the nest that reads it plainly (``B_local[i]``: element ``p`` on thread
``p % 128``), and each thread of the reshaping nest stored into its own registers at the
element's register index, whatever thread owned the element. For a 32 x 576 tile on 128
threads, 2 of every 3 elements went to the wrong thread: a silent wrong result on every GPU
target (the 128- and 512-column tiles happened to line up). Now the flat fragment takes the
nest's layout through the reshape, and a store into an element the storing thread may not hold
is a typed error like such a read (``bind_parallel_loops``).

Reference: numpy (a copy, exact).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import LayoutInferenceError
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]


@pytest.fixture(autouse=True)
def _emulated(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")


def composable_copy(M, N, block_M, block_N, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M * N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_local = T.alloc_fragment([block_M, block_N], dtype)
            B_local = T.alloc_fragment([block_M * block_N], dtype)
            T.copy(A[by * block_M, bx * block_N], A_local)
            for i, j in T.Parallel(block_M, block_N):
                B_local[i * block_N + j] = A_local[i, j]
            for i in T.Parallel(block_M * block_N):
                B[by * block_M * N + bx * block_N + i // block_N * N + i % block_N] = B_local[i]

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("M", "N", "block_M", "block_N"), [(64, 576, 32, 576), (32, 384, 16, 192), (256, 256, 128, 128)]
)
def test_a_fragment_filled_as_the_nest_reshaped(target, M, N, block_M, block_N) -> None:
    kernel = tilelang.compile(composable_copy(M, N, block_M, block_N, "float32"), out_idx=[1], target=target)
    a = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a.reshape(-1))


def test_a_2d_fragment_read_as_a_flat_nest() -> None:
    # the other direction: a flat nest over a 2-D fragment, the 2-D one placed by a copy first
    @T.prim_func
    def main(A: T.Tensor((16, 96), "float32"), B: T.Tensor((16, 96), "float32")):
        with T.Kernel(1, threads=64):
            A_local = T.alloc_fragment((16, 96), "float32")
            F = T.alloc_fragment((16 * 96,), "float32")
            T.copy(A, A_local)
            for p in T.Parallel(16 * 96):
                F[p] = A_local[p // 96, p % 96] * 2.0
            for i, j in T.Parallel(16, 96):
                B[i, j] = F[i * 96 + j]

    kernel = tilelang.compile(main, out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    a = np.random.default_rng(1).standard_normal((16, 96)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a * 2.0)


@needs_backend("cuda")
def test_a_store_into_another_threads_element_is_refused() -> None:
    # column-major flattening is no reshape of the nest: the element's owner is not provable
    @T.prim_func
    def main(A: T.Tensor((16, 192), "float32"), B: T.Tensor((16 * 192,), "float32")):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((16, 192), "float32")
            B_local = T.alloc_fragment((16 * 192,), "float32")
            T.copy(A, A_local)
            for i, j in T.Parallel(16, 192):
                B_local[j * 16 + i] = A_local[i, j]
            for p in T.Parallel(16 * 192):
                B[p] = B_local[p]

    with pytest.raises(LayoutInferenceError, match=r"B_local\[j \* 16 \+ i\] is written") as info:
        tilelang.compile(main, target={"kind": "cuda", "arch": "sm_80"})
    assert "B_local[j * 16 + i] = A_local[i, j]" in str(info.value)


@needs_backend("cuda")
def test_a_copy_into_a_one_row_fragment_is_no_irregular_store() -> None:
    # T.copy(A, A_local) over a (1, N) tile stores A_local[0, i]: a constant and a loop variable,
    # placed by the copy itself (TileLang's issue_1719 layout_5; the store check refused it)
    @T.prim_func
    def main(A: T.Tensor((1, 128), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            A_local = T.alloc_fragment((1, 128), "float32")
            B_local = T.alloc_fragment((1,), "float32")
            T.copy(A, A_local)
            T.reduce_sum(A_local, B_local, dim=1)
            T.copy(B_local, B)

    kernel = tilelang.compile(main, out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    a = np.arange(128, dtype=np.float32).reshape(1, 128) / 64
    np.testing.assert_allclose(np.asarray(kernel(a)), a.sum(axis=1), rtol=1e-6)
