"""A condition that reads shared memory every thread stored the same values in is the same for
every thread of the block, so it may hold block barriers (TileLang's
testing/python/language/test_tilelang_language_any_of.py and all_of.py: each thread copies a row
of the block mask into a shared vector in a ``T.serial`` loop, then ``if T.any_of(mask_s):``
guards the tile copies and the gemm). tile refused it ("a shared-memory barrier is needed inside
a condition that depends on the thread index"); a shared buffer with any other store (a tile
copy, a per-thread index, a pointer write) still makes its reads thread-dependent.

The same program found a misplaced tile on sm_90a: a 64-byte-swizzled A tile (period 512 bytes)
after the small mask vector put the 128-byte-swizzled B tile (period 1024) at 512 mod 1024, and
every wgmma read B's wrong elements (a wrong result on every block). Swizzled tiles now all take
the kernel's widest period as their alignment.

Reference: numpy (float32 products of float16 operands).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import BackendError
from tile.testsupport.markers import needs_backend

pytestmark = needs_backend("cuda")


def block_sparse(M, N, K, bm, bn, bk, reduce="any", cd=2):
    shape = (M // bm, N // bn, K // bk, cd)

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        Mask: T.Tensor(shape, "bool"),
        C: T.Tensor((M, N), "float16"),
    ):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16")
            B_shared = T.alloc_shared((bk, bn), "float16")
            C_local = T.alloc_fragment((bm, bn), "float32")
            mask_s = T.alloc_shared(cd, "bool")
            C_shared = T.alloc_shared((bm, bn), "float16")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                for i in T.serial(cd):
                    mask_s[i] = Mask[by, bx, k, i]
                if (T.any_of(mask_s) if reduce == "any" else T.all_of(mask_s)):
                    T.copy(A[by * bm, k * bk], A_shared)
                    T.copy(B[k * bk, bx * bn], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * bm, bx * bn])

    return main


def reference(a, b, mask, bm, bn, bk, reduce):
    M, N = a.shape[0], b.shape[1]
    out = np.zeros((M, N), np.float32)
    for i in range(M // bm):
        for j in range(N // bn):
            for k in range(a.shape[1] // bk):
                take = mask[i, j, k].any() if reduce == "any" else mask[i, j, k].all()
                if take:
                    out[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += (
                        a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk].astype(np.float32)
                        @ b[k * bk:(k + 1) * bk, j * bn:(j + 1) * bn].astype(np.float32)
                    )
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("reduce", ["any", "all"])
def test_a_condition_on_a_shared_mask_every_thread_stored(monkeypatch, arch, reduce) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    M = N = K = 256
    bm, bn, bk = 128, 128, 32
    kernel = tilelang.compile(block_sparse(M, N, K, bm, bn, bk, reduce), out_idx=-1,
                              target={"kind": "cuda", "arch": arch})  # fmt: skip
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    mask = np.repeat(rng.random((M // bm, N // bn, K // bk, 1)) > 0.5, 2, axis=3)
    mask[..., 0] = reduce == "all"  # any_of reads the second element, all_of both
    got = np.asarray(kernel(a, b, mask)).astype(np.float32)
    np.testing.assert_allclose(got, reference(a, b, mask, bm, bn, bk, reduce), rtol=1e-2, atol=5e-2)


def test_a_shared_vector_stored_per_thread_still_decides_per_thread() -> None:
    # thread t writes flag[t % 2]: threads see different values, so a barrier inside is refused
    @T.prim_func
    def main(
        A: T.Tensor((64, 32), "float16"), Flags: T.Tensor((2,), "bool"), C: T.Tensor((64, 32), "float16")
    ):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64, 32), "float16")
            flag = T.alloc_shared(2, "bool")
            flag[tx % 2] = Flags[tx % 2]
            if flag[tx % 2]:
                T.copy(A, S)
                T.copy(S, C)

    with pytest.raises(BackendError, match="depends on the thread index"):
        tilelang.compile(main, target={"kind": "cuda", "arch": "sm_80"})
