"""A row reduction whose rows span several warps keeps one partial per warp group, not per thread.

TileLang's cuda/f32x2_intrinsics reduces a (128, 128) float32 fragment that ``T.copy`` laid
out one column per thread (128 threads): every row spans all four warps. The cross-warp step
stored each thread's partial of each row, a 128 x 128 float32 workspace (64 KiB of static
shared memory), which ptxas refuses on sm_80 (48 KiB). After the warp shuffles the 32 lanes of a
warp hold the same partials, so one slot per warp and row is enough: 4 x 128 (2 KiB).
With 96 threads (three warps) the butterfly across warps named a fourth warp that does not
exist (tx ^ 64 for warp 1) and read whatever its slot held: those partners are skipped now.
References: numpy's row sums and maxima; the workspace's size in the generated source.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T


def row_reduce(kind: str, rows: int = 128, cols: int = 128, threads: int = 128):
    reduce = {"sum": T.reduce_sum, "max": T.reduce_max}[kind]

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), C: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((rows, cols), "float32")
            dst = T.alloc_fragment((rows,), "float32")
            T.copy(A, src)
            reduce(src, dst, dim=1)
            T.copy(dst, C)

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_workspace_is_one_slot_per_warp_and_row(arch):
    source = tilelang.lower(row_reduce("sum"), target={"kind": "cuda", "arch": arch}).kernel_source
    sizes = [int(n) for n in re.findall(r"__shared__[^;]*dst_ws\w*\[(\d+)\]", source)]
    assert sizes == [4 * 128], sizes


@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("threads", [128, 96])
def test_cross_warp_row_reductions_match_numpy(kind, threads, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_CHECK", "1")  # the first-lane stores and the reads are ordered
    program = row_reduce(kind, cols=threads, threads=threads)
    kernel = tilelang.compile(program, target={"kind": "cuda", "arch": "sm_80"})
    a = np.random.default_rng(threads).standard_normal((128, threads)).astype(np.float32)
    c = np.zeros(128, np.float32)
    kernel(a, c)
    want = a.astype(np.float64).sum(1) if kind == "sum" else a.max(1)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
