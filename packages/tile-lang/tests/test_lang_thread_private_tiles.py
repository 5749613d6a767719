"""Tile operators on a thread's own buffers (``T.alloc_local``), as TileLang's 2:4 compressor
(examples/gemm_sp/sparse_utils.py) writes them.

Each thread of the block handles its own slice of a row: ``T.copy`` of that slice into a
``T.alloc_local`` buffer, ``T.clear`` of another, element work, ``T.copy`` of the local buffer
back out to the thread's slice. TileLang runs a copy or fill of a local buffer (and a
``T.Parallel`` nest that stores into one) whole on every thread. tile spread them over the
block's threads like a shared tile's, so each thread loaded and stored only a quarter of its
slice, at other threads' offsets: a silent wrong result on every GPU target. The slices are
written with names bound in the body (``k_base = bk * 64``), whose extent is constant only with
``k_base``'s value put in; that stopped the compile before ("symbolic extents").

References: numpy, elementwise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import TileTypeError
from tile.testsupport.markers import needs_backend

TARGETS = [  # the CPU backend runs a block as one thread: it refuses T.get_thread_binding
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]

ROWS, COLS, THREADS, PER_THREAD = 4, 128, 4, 16


@T.prim_func
def slices_per_thread(A: T.Tensor((ROWS, COLS), "float32"), B: T.Tensor((ROWS, COLS), "float32")):
    with T.Kernel(ROWS, COLS // (THREADS * PER_THREAD), threads=THREADS) as (bz, bk):
        tn = T.get_thread_binding()
        mine = T.alloc_local([PER_THREAD], "float32")
        scale = T.alloc_local([PER_THREAD], "float32")
        T.clear(scale)
        k_base = bk * (THREADS * PER_THREAD)
        start = k_base + tn * PER_THREAD
        T.copy(A[bz, start : k_base + (tn + 1) * PER_THREAD], mine)
        for i in T.Parallel(PER_THREAD):
            scale[i] = scale[i] + T.float32(i + 1)  # every thread's own 1..16
        for i in T.serial(PER_THREAD):
            mine[i] = mine[i] * scale[i]
        T.copy(mine, B[bz, k_base + tn * PER_THREAD : k_base + tn * PER_THREAD + PER_THREAD])


@T.prim_func
def slices_written_out(A: T.Tensor((ROWS, COLS), "float32"), B: T.Tensor((ROWS, COLS), "float32")):
    # the same work with each slice spelt out: constant extents without any folding
    with T.Kernel(ROWS, COLS // (THREADS * PER_THREAD), threads=THREADS) as (bz, bk):
        tn = T.get_thread_binding()
        mine = T.alloc_local([PER_THREAD], "float32")
        scale = T.alloc_local([PER_THREAD], "float32")
        T.fill(scale, 0)
        first = bk * (THREADS * PER_THREAD) + tn * PER_THREAD
        T.copy(A[bz, first : first + PER_THREAD], mine)
        for i in T.Parallel(PER_THREAD):
            scale[i] = scale[i] + T.float32(i + 1)
        for i in T.serial(PER_THREAD):
            mine[i] = mine[i] * scale[i]
        T.copy(mine, B[bz, first : first + PER_THREAD])


@pytest.mark.parametrize("kernel", [slices_per_thread, slices_written_out], ids=["named", "spelt_out"])
@pytest.mark.parametrize("target", TARGETS)
def test_each_thread_copies_and_fills_its_own_buffer_whole(target, kernel, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(7).standard_normal((ROWS, COLS)).astype(np.float32)
    b = np.full_like(a, np.nan)
    tilelang.compile(kernel, target=target)(a, b)
    factors = np.tile(np.arange(1, PER_THREAD + 1, dtype=np.float32), COLS // PER_THREAD)
    np.testing.assert_array_equal(b, a * factors)


def test_a_slice_folded_with_a_name_assigned_twice_is_refused():
    with pytest.raises(TileTypeError, match="assigns `base` again") as caught:

        @T.prim_func
        def moved(A: T.Tensor((COLS,), "float32"), B: T.Tensor((COLS,), "float32")):
            with T.Kernel(1, threads=1):
                mine = T.alloc_local([PER_THREAD], "float32")
                base = 0
                for _k in T.serial(2):
                    T.copy(A[base : base * 2 + PER_THREAD], mine)  # PER_THREAD long only while base = 0
                    T.copy(mine, B[0:PER_THREAD])
                    base = base + PER_THREAD

    copy_line = next(
        n for n, line in enumerate(Path(__file__).read_text().splitlines(), 1) if "T.copy(A[base :" in line
    )
    assert caught.value.location is not None and caught.value.location.line == copy_line


def test_tuple_assignments_swap_elements_and_variables():
    # TileLang's tests and its 2:4 compressor swap with tuples (TVMScript unpacks into new names only)
    @T.prim_func
    def swaps(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            A[0], A[1] = A[1], A[0]
            a = T.alloc_var("float32", A[2])
            b = T.alloc_var("float32", A[3])
            a, b = b, a
            A[2], A[3] = a, b

    data = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    tilelang.compile(swaps, target="cpu")(data)
    np.testing.assert_array_equal(data, [2.0, 1.0, 4.0, 3.0])


@pytest.mark.parametrize("target", TARGETS)
def test_a_named_temporary_keeps_a_nest_spread_over_the_threads(target, monkeypatch):
    # `row = ...` in the body is a one-element local buffer in apache-tvm 0.27, allocated in the
    # body: a value of one iteration, not a thread's buffer, so the nest is shared out as usual
    # (run whole by every thread, each element of W was doubled once per thread)
    monkeypatch.setenv("TILE_DEVICE", "emu")

    @T.prim_func
    def scaled(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            W = T.alloc_shared((128,), "int32")
            T.copy(A[bx * 128], W)
            for i in T.Parallel(128):
                row = bx * 128 + i
                if row < 250:
                    W[i] = W[i] * 2 + 1
            T.copy(W, B[bx * 128])

    a = np.arange(256, dtype=np.int32) * 7 - 300
    b = np.zeros_like(a)
    tilelang.compile(scaled, target=target)(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(256) < 250, a * 2 + 1, a))
