"""``T.Parallel(..., loop_layout=T.Fragment(...))``: a T.Parallel nest bound to threads by hand.

Iteration ``(i, j)`` runs on the thread(s) the fragment gives element ``(i, j)`` (TileLang's
``loop_layout``). Checked on the CUDA emulator against numpy, with the thread binding read
back from the generated source; on the CPU (one thread per block) the layout has no effect.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import LayoutInferenceError, TileShapeError, TileTypeError
from tile.testsupport.markers import needs_backend

SM80 = {"kind": "cuda", "arch": "sm_80"}


def doubling(layout, M=128, N=32, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            for i, j in T.Parallel(M, N, loop_layout=layout):
                B[i, j] = A[i, j] * 2.0

    return main


def four_consecutive(i, j):
    """Element e = 32 i + j on thread (e // 4) % 128, four consecutive elements per thread."""
    e = i * 32 + j
    return (e // 4) % 128, e % 4 + (e // 512) * 4


def row_per_thread(i, j):
    return i, j


def two_replicas(i, j, rep):
    e = i * 32 + j
    return (e // 4) % 64 + rep * 64, e % 4 + (e // 256) * 4


LAYOUTS = {
    "four_consecutive": lambda: T.Fragment((128, 32), forward_fn=four_consecutive),
    "row_per_thread": lambda: T.Fragment((128, 32), forward_fn=row_per_thread),
    "two_replicas": lambda: T.Fragment((128, 32), forward_fn=two_replicas, replicate=2),
}


def _run(kernel):
    a = np.random.default_rng(7).standard_normal((128, 32)).astype("float32")
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2)


@needs_backend("cuda")
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_nest_runs_where_the_loop_layout_says_on_the_emulator(monkeypatch, name):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(doubling(LAYOUTS[name]()), target=SM80)
    _run(kernel)
    stores = [line for line in kernel.get_kernel_source().splitlines() if "B_ptr" in line and "=" in line]
    if name == "four_consecutive":  # thread t stores elements 4t .. 4t+3 (+ 512 per step): one float4
        assert any("float4" in s and "((int)threadIdx.x) * 4)" in s and "* 512)" in s for s in stores)
    if name == "row_per_thread":  # thread t walks row t: 32 consecutive floats
        assert any("float4" in s and "((int)threadIdx.x) * 32)" in s for s in stores)
    if name == "two_replicas":  # threads t and t + 64 hold the same elements
        assert any("& 63)" in s for s in stores)


def test_the_loop_layout_has_no_effect_on_the_cpu():
    for make in LAYOUTS.values():
        _run(tilelang.compile(doubling(make()), target="cpu"))


def test_a_loop_layout_of_another_shape_is_refused_at_its_line():
    with pytest.raises(TileShapeError, match="shape") as err:
        tilelang.compile(doubling(T.Fragment((64, 32), forward_fn=row_per_thread)), target="cpu")
    assert err.value.location is not None and "loop_layout" in err.value.location.source_line


def test_a_loop_layout_that_is_not_a_fragment_is_refused():
    with pytest.raises(TileTypeError, match=r"T\.Fragment"):
        tilelang.compile(doubling(T.Layout((128, 32), lambda i, j: i * 32 + j)), target="cpu")


@needs_backend("cuda")
def test_a_loop_layout_on_more_threads_than_the_block_is_refused():
    wide = T.Fragment((128, 32), forward_fn=lambda i, j: (i * 2 + j // 16, j % 16))  # 256 threads
    with pytest.raises(LayoutInferenceError, match="256 threads, but the block has 128"):
        tilelang.compile(doubling(wide), target=SM80)
