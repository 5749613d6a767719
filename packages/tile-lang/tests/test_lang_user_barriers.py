"""``pass_configs={"tl.disable_thread_storage_sync": True}``: the kernel's author places the
block barriers, as in TileLang, where the key turns its barrier planning off.

TileLang's DSA top-k kernel (examples/dsa_sparse_finetune) sorts in shared memory with a
bitonic network: each step swaps pairs under a condition on the thread's own element, and the
author puts a ``T.sync_threads()`` between steps. tile's barrier plan cannot prove that no two
threads touch one pair (the partner is ``i ^ (1 << s)``), wants a barrier inside the
condition, and refuses; with the key the kernel runs as written. Reference: ``np.sort``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import BackendError
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]

N = 64
STEPS = int(math.log2(N))


@T.prim_func
def bitonic(Values: T.Tensor((N,), "float32"), Sorted: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=N):
        v = T.alloc_shared((N,), "float32")
        T.copy(Values, v)
        T.sync_threads()
        for s1 in T.serial(STEPS):
            for s2 in T.serial(s1 + 1):
                for i in T.Parallel(N):
                    descending = (i & (1 << (s1 + 1))) != 0
                    j = i ^ (1 << (s1 - s2))
                    if i < j and ((not descending and v[i] > v[j]) or (descending and v[i] < v[j])):
                        kept = v[i]
                        v[i] = v[j]
                        v[j] = kept
                T.sync_threads()
        T.copy(v, Sorted)


@pytest.mark.parametrize("target", TARGETS)
def test_the_authors_barriers_alone_sort_correctly(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(bitonic, target=target, pass_configs={"tl.disable_thread_storage_sync": True})
    values = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    out = np.zeros_like(values)
    kernel(values, out)
    np.testing.assert_array_equal(out, np.sort(values))
    source = kernel.get_kernel_source()
    barrier = "__syncthreads()"
    # the author's two (after the copy in, after each step), nothing planned around the copies
    assert source.count(barrier) == 2, source


@pytest.mark.parametrize("target", TARGETS)
def test_without_the_key_tile_plans_and_refuses_the_barrier_it_cannot_place(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    with pytest.raises(BackendError, match="barrier is needed inside a condition"):
        tilelang.compile(bitonic, target=target)
