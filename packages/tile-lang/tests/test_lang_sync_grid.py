"""``T.sync_grid()``: a grid-wide barrier at the top level of a ``T.Kernel`` body, as TileLang's
persistent MLA decoder (examples/deepseek_mla/example_mla_decode_persistent.py) writes it
between its split-K phase and its combine phase.

tile ends the kernel there and launches the rest as a second kernel of the same grid (the
second launch sees every write of the first, which is what the barrier promises). A scalar the
second phase sets again (``waves = ...``) is allowed; a buffer whose contents would have to
survive the split, and a ``T.sync_grid`` inside a loop, are typed errors at its line. Results
are compared with numpy on the CPU backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import TileScopeError

N, BLK = 256, 64


@T.prim_func
def _mirror(A: T.Tensor((N,), "float32"), P: T.Tensor((N,), "float32"), Out: T.Tensor((N,), "float32")):
    """Phase 1: P = 2 A, one block per slice. Phase 2: each block reads another block's slice."""
    with T.Kernel(N // BLK // 2, threads=64) as bx:
        mirrored = T.alloc_fragment((BLK,), "float32")
        waves = T.ceildiv(N // BLK, 2)  # a scalar of the kernel, set again after the split
        for w in T.serial(waves):
            for i in T.Parallel(BLK):
                P[(w * 2 + bx) * BLK + i] = A[(w * 2 + bx) * BLK + i] * 2.0
        T.sync_grid()
        waves = T.ceildiv(N // BLK, 2)  # a scalar of the kernel, set again after the split
        for w in T.serial(waves):
            for i in T.Parallel(BLK):
                mirrored[i] = P[N - 1 - ((w * 2 + bx) * BLK + i)]
            for i in T.Parallel(BLK):
                Out[(w * 2 + bx) * BLK + i] = mirrored[i] + 1.0


def test_a_grid_sync_splits_the_kernel_into_two_launches():
    kernel = tilelang.compile(_mirror, out_idx=[-1], target="cpu")
    a = np.random.default_rng(3).standard_normal(N).astype("float32")
    partial = np.zeros(N, dtype="float32")
    np.testing.assert_array_equal(kernel(a, partial), (2 * a)[::-1] + 1)
    np.testing.assert_array_equal(partial, 2 * a)


def _kept_in_registers() -> object:
    @T.prim_func
    def kept(A: T.Tensor((N,), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLK, threads=64) as bx:
            values = T.alloc_fragment((BLK,), "float32")
            for i in T.Parallel(BLK):
                values[i] = A[bx * BLK + i]
            T.sync_grid()
            for i in T.Parallel(BLK):
                Out[bx * BLK + i] = values[i]

    return kept


def _in_a_loop() -> object:
    @T.prim_func
    def looped(A: T.Tensor((N,), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLK, threads=64) as bx:
            for i in T.Parallel(BLK):
                Out[bx * BLK + i] = A[bx * BLK + i]
                T.sync_grid()

    return looped


@pytest.mark.parametrize(
    ("make", "message"),
    [(_kept_in_registers, "values is used both before and after T.sync_grid"), (_in_a_loop, "top level")],
)
def test_what_a_split_cannot_keep_is_refused_at_the_line(make, message):
    with pytest.raises(TileScopeError, match=message) as info:
        tilelang.compile(make(), out_idx=[-1], target="cpu")
    assert info.value.location is not None and info.value.location.filename == __file__
