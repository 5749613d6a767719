"""T.Pipelined loops: automatic num_stages and manual order=/stage= schedules.

Two loop bodies: a GEMM main loop (copy A, copy B, gemm) and a chunked row reduction
(copy a chunk, accumulate it in T.Parallel). K is ``T.dynamic`` in the second, so the
pipeline's prologue/epilogue and the tail chunk run for many trip counts per compile.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tile.lang.language as T
from tile.conformance import reference as ref
from tile.conformance import strategies as ts

#: name -> (num_stages, order, stage) for a three-statement body; None = automatic.
GEMM_SCHEDULES = {
    "auto1": (1, None, None),
    "auto2": (2, None, None),
    "auto3": (3, None, None),
    "manual_in_order": (2, [0, 1, 2], [0, 0, 1]),
    "manual_reordered": (2, [1, 0, 2], [0, 0, 1]),
    "manual_deep": (3, [0, 1, 2], [0, 0, 2]),
}
#: the same for the two-statement reduction body.
SUM_SCHEDULES = {
    "auto1": (1, None, None),
    "auto2": (2, None, None),
    "auto4": (4, None, None),
    "manual": (2, [0, 1], [0, 1]),
    "manual_deep": (3, [0, 1], [0, 2]),
}


def _pipelined(n, schedule):
    stages, order, stage = schedule
    if order is None:
        return T.Pipelined(n, num_stages=stages)
    return T.Pipelined(n, num_stages=stages, order=order, stage=stage)


def pipelined_gemm_kernel(M: int, N: int, K: int, schedule: str, dtype: str):
    bm, bn, bk = 16, 16, 8
    sched = GEMM_SCHEDULES[schedule]

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in _pipelined(T.ceildiv(K, bk), sched):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def pipelined_sum_kernel(R: int, bk: int, schedule: str, dtype: str):
    K = T.dynamic("K")
    sched = SUM_SCHEDULES[schedule]

    @T.prim_func
    def main(X: T.Tensor((R, K), dtype), Y: T.Tensor((R, bk), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            X_s = T.alloc_shared((R, bk), dtype)
            acc = T.alloc_fragment((R, bk), "float32")
            T.clear(acc)
            for k in _pipelined(T.ceildiv(K, bk), sched):
                T.copy(X[0, k * bk], X_s)
                for i, j in T.Parallel(R, bk):
                    acc[i, j] = acc[i, j] + X_s[i, j]
            T.copy(acc, Y)

    return main


@given(schedule=st.sampled_from(sorted(GEMM_SCHEDULES)),
       mnk=st.sampled_from([(16, 16, 64), (33, 17, 40), (5, 31, 13), (64, 8, 7)]),
       seed=st.integers(0, 2**16), data=st.data())
def test_pipelined_gemm_schedules(tile_backend, schedule, mnk, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16")), label="dtype")
    kernel = tile_backend.build(pipelined_gemm_kernel, *mnk, schedule, dtype, out_idx=(-1,))
    M, N, K = mnk
    rng = np.random.default_rng(seed)
    a = ref.random_array(rng, (M, K), dtype)
    b = ref.random_array(rng, (K, N), dtype)
    ref.assert_close(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64), dtype,
                     accumulate=K, magnitude=4.0,
                     product_error=ref.gemm_product_error(dtype, tile_backend.capabilities))


@given(schedule=st.sampled_from(sorted(SUM_SCHEDULES)), rows=st.sampled_from([1, 3, 8]),
       bk=st.sampled_from([4, 16]), k=ts.dims(200), seed=st.integers(0, 2**16), data=st.data())
def test_pipelined_reduction_any_trip_count(tile_backend, schedule, rows, bk, k, seed, data) -> None:
    dtype = data.draw(ts.dtypes(tile_backend.capabilities.dtypes, ("float32", "float16")), label="dtype")
    kernel = tile_backend.build(pipelined_sum_kernel, rows, bk, schedule, dtype, out_idx=(-1,))
    x = ref.random_array(np.random.default_rng(seed), (rows, k), dtype)
    padded = np.zeros((rows, -(-k // bk) * bk))
    padded[:, :k] = x
    expected = padded.reshape(rows, -1, bk).sum(1)
    ref.assert_close(kernel(x), expected, dtype, "float32", accumulate=k, magnitude=2.0)


def gemv_declared_in_body_kernel(M: int, K: int, bm: int, bk: int, stages: int):
    """``y = A @ x`` with the tiles declared inside the ``T.Pipelined`` body (TileLang's gemv example)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), x: T.Tensor((K,), "float16"), y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=64) as bx:
            acc = T.alloc_fragment((bm, bk), "float32")
            out = T.alloc_fragment((bm,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                a_s = T.alloc_shared((bm, bk), "float16")
                T.copy(A[bx * bm, k * bk], a_s)
                a_f = T.alloc_fragment((bm, bk), "float16")
                T.copy(a_s, a_f)
                x_f = T.alloc_fragment((bk,), "float16")
                T.copy(x[k * bk], x_f)
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += a_f[i, j].astype("float32") * x_f[j].astype("float32")
            T.reduce_sum(acc, out, dim=1)
            T.copy(out, y[bx * bm])

    return main


def test_pipelined_body_declaring_its_tiles(tile_backend) -> None:
    # the declarations were wrapped with the statements they scope over, and the ring's IR was ill-formed
    M, K = 40, 96
    kernel = tile_backend.build(gemv_declared_in_body_kernel, M, K, 16, 32, 2, out_idx=(-1,))
    rng = np.random.default_rng(5)
    a = rng.integers(-4, 4, (M, K)).astype(np.float16)
    x = rng.integers(-4, 4, K).astype(np.float16)
    np.testing.assert_array_equal(kernel(a, x), a.astype(np.float32) @ x.astype(np.float32))  # exact integers
