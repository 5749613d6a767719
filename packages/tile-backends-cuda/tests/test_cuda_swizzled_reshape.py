"""``T.reshape`` / ``T.view`` of a shared tile with a swizzled layout, on CUDA and ROCm.

A reshape is a view of the same bytes: its elements are the tile's logical elements in
row-major order, so ``apply_shared_layouts`` maps its accesses through the tile's swizzle
as it maps the tile's own (before, the view kept pointing at the replaced allocation:
"Invalid use of undefined variable A_shared"). A view with another element type reads the
tile's logical bytes through the swizzle, as numpy's ``.view(dtype)`` of the tile. Run
under the CPU emulator as CUDA sm_80 and ROCm gfx90a against numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _emu_targets import TARGETS, compile_for

import tile.lang.language as T
from tile.lang.cuda.intrinsics import make_mma_swizzle_layout
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]


def read_through_reshape(rows: int, cols: int, shape: tuple[int, int], dtype: str) -> Any:
    """A swizzled (rows, cols) tile written as itself, read back through a reshape to ``shape``."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), dtype), B: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((rows, cols), dtype)
            T.annotate_layout({S: make_mma_swizzle_layout(S)})
            T.copy(A, S)
            R = T.reshape(S, list(shape))
            T.copy(R, B)

    return main


def write_through_reshape(rows: int, cols: int, dtype: str) -> Any:
    """A swizzled (rows, cols) tile written through a 1-d reshape, read back as itself, doubled."""

    @T.prim_func
    def main(A: T.Tensor((rows * cols,), dtype), B: T.Tensor((rows, cols), dtype)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((rows, cols), dtype)
            T.annotate_layout({S: make_mma_swizzle_layout(S)})
            R = T.reshape(S, [rows * cols])
            T.copy(A, R)
            for i, j in T.Parallel(rows, cols):
                B[i, j] = S[i, j] * T.cast(2, dtype)

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("rows", "cols", "shape", "dtype"),
    [(32, 32, (1024, 1), "float32"), (32, 32, (64, 16), "float32"), (32, 64, (16, 128), "float16")],
)
def test_read_through_reshape_of_swizzled_tile(
    target: dict[str, str], rows: int, cols: int, shape: tuple[int, int], dtype: str
) -> None:
    kernel = compile_for(read_through_reshape(rows, cols, shape, dtype), target)
    a = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(dtype)
    np.testing.assert_array_equal(kernel(a), a.reshape(shape))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("rows", "cols", "dtype"), [(32, 32, "float32"), (16, 64, "float16")])
def test_write_through_reshape_of_swizzled_tile(
    target: dict[str, str], rows: int, cols: int, dtype: str
) -> None:
    kernel = compile_for(write_through_reshape(rows, cols, dtype), target)
    a = np.random.default_rng(rows * cols).standard_normal(rows * cols).astype(dtype)
    np.testing.assert_array_equal(kernel(a), a.reshape(rows, cols) * np.array(2, dtype=dtype))


@pytest.mark.parametrize("target", TARGETS)
def test_a_view_with_another_dtype_reuses_the_swizzled_tiles_bytes(target: dict[str, str]) -> None:
    # TileLang's sparse MLA backward stages float32 results in the bytes of a bfloat16 gemm
    # operand once the gemm is done: T.view(KV_shared, shape, dtype="float32"). The view reads
    # and writes the storage row-major (no swizzle: its elements straddle the swizzle's units);
    # it was refused.
    @T.prim_func
    def main(
        A: T.Tensor((32, 64), "float16"),
        B: T.Tensor((32, 64), "float16"),
        C: T.Tensor((32, 32), "float32"),
        D: T.Tensor((32, 32), "float32"),
    ):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((32, 64), "float16")
            T.annotate_layout({S: make_mma_swizzle_layout(S)})
            T.copy(A, S)
            T.copy(S, B)
            F = T.view(S, [32, 32], dtype="float32")
            T.copy(C, F)
            T.copy(F, D)

    kernel = compile_for(main, target)  # D is the output
    rng = np.random.default_rng(5)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    b = np.zeros_like(a)
    d = kernel(a, b, c)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(d, c)
    source = kernel.get_kernel_source()
    assert "^" in source  # the tile itself is still read and written through its swizzle



@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("dtype", "view_dtype"),
    [("float16", "int8"), ("int8", "float16"), ("float16", "float32"), ("float32", "int16")],
    ids=["narrowing", "widening", "widening_to_words", "narrowing_words"],
)
def test_a_view_with_another_dtype_reads_the_tiles_logical_bytes(
    target: dict[str, str], dtype: str, view_dtype: str
) -> None:
    # TileLang's language/view: written through the swizzled tile, read through the view, the
    # values are numpy's .view of the tile (before, the view read the storage's bytes as they
    # lay, scrambled by the swizzle: 8122 of 8192 elements wrong)
    rows, cols = 32, 64
    ratio = np.dtype(dtype).itemsize / np.dtype(view_dtype).itemsize
    view_shape = (rows, int(cols * ratio))

    @T.prim_func
    def main(A: T.Tensor((rows, cols), dtype), B: T.Tensor(view_shape, view_dtype)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((rows, cols), dtype)
            V = T.view(S, list(view_shape), dtype=view_dtype)
            T.annotate_layout({S: make_mma_swizzle_layout(S)})
            T.copy(A, S)
            T.copy(V, B)

    kernel = compile_for(main, target)
    words = np.random.default_rng(7).integers(0, 2**16, size=rows * cols * np.dtype(dtype).itemsize // 2)
    a = words.astype(np.uint16).view(dtype).reshape(rows, cols)
    got = kernel(a)
    np.testing.assert_array_equal(got.view(np.uint8), a.view(view_dtype).reshape(view_shape).view(np.uint8))
    assert "^" in kernel.get_kernel_source()  # the tile is swizzled


@pytest.mark.parametrize("target", TARGETS)
def test_values_written_through_a_view_read_back_through_the_tile(target: dict[str, str]) -> None:
    rows, cols = 32, 64

    @T.prim_func
    def main(C: T.Tensor((rows, cols // 2), "float32"), D: T.Tensor((rows, cols), "float16")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((rows, cols), "float16")
            T.annotate_layout({S: make_mma_swizzle_layout(S)})
            F = T.view(S, [rows, cols // 2], dtype="float32")
            T.copy(C, F)
            T.copy(S, D)

    kernel = compile_for(main, target)
    c = np.random.default_rng(8).standard_normal((rows, cols // 2)).astype(np.float32)
    np.testing.assert_array_equal(kernel(c).view(np.uint16), c.view(np.uint16).reshape(rows, cols))
