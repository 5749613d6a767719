"""Empty torch tensors as kernel arguments (TileLang's issue 1697: a GEMM with K = 0).

torch gives an empty tensor strides that are not row-major (``torch.randn(64, 0)`` has
``(1, 1)``), and the compiled entry refused them ("expected to be compact array");
``arguments.stage_aligned`` passes them with row-major strides (no element moves).
"""

from __future__ import annotations

import pytest

import tile.lang as tilelang
import tile.lang.language as T

torch = pytest.importorskip("torch")


def matmul(M: int, N: int, K: int, block: int = 32) -> object:
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), "float32")
            B_shared = T.alloc_shared((block, block), "float32")
            C_local = T.alloc_fragment((block, block), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block)):
                T.copy(A[by * block, k * block], A_shared)
                T.copy(B[k * block, bx * block], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block, bx * block])

    return main


def test_gemm_with_empty_k_gives_zeros() -> None:
    kernel = tilelang.compile(matmul(64, 32, 0), out_idx=[-1], target="cpu")
    a, b = torch.randn(64, 0), torch.randn(0, 32)
    assert a.stride() == (1, 1)  # torch's strides for an empty tensor: not row-major (0, 1)
    for _ in range(2):  # the first call and the fast path of the next
        c = kernel(a, b)
        assert torch.equal(c, torch.matmul(a, b))  # all zeros
