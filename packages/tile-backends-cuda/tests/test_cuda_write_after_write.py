"""Two statements that store to the same shared elements from different threads are ordered.

``T.fill(S, -1)`` then ``T.copy(A, S)``: the fill gives element ``i * 128 + tx`` to thread
``tx``, the copy's vectorized loop gives four consecutive elements to each thread, so most
elements are filled by one thread and copied into by another. TVM's barrier plan (and
tile's, which followed it) ordered a read after a write and a write after a read, never a
write after a write, so a thread's fill could land after another thread's copy: the
emulator, which runs each thread to the next barrier in turn, kept 508 of the 1024 filled
values. The kernels run on the CPU emulator and are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from _emu_targets import TARGETS, compile_for

import tile.lang.language as T

pytestmark = pytest.mark.emu


def _fill_then_copy(n: int) -> T.PrimFunc:
    @T.prim_func
    def main(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((n, n), "float32")
            T.fill(S, -1.0)
            T.copy(A[0 : n // 2, 0:n], S[0 : n // 2, 0:n])  # the top half over the fill
            T.copy(S, B)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_a_copy_over_a_fill_lands_last(target: dict[str, str]) -> None:
    kernel = compile_for(_fill_then_copy(32), target)
    a = np.random.default_rng(7).standard_normal((32, 32)).astype(np.float32)
    want = np.full((32, 32), -1.0, np.float32)
    want[:16] = a[:16]
    np.testing.assert_array_equal(np.asarray(kernel(a)), want)


def _fill_then_gemm_result(m: int, n: int, k: int) -> T.PrimFunc:
    @T.prim_func
    def main(
        A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float16")
    ):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((m, k), "float16")
            B_s = T.alloc_shared((k, n), "float16")
            C_s = T.alloc_shared((m, n), "float16")
            acc = T.alloc_fragment((m, n), "float16")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            T.fill(C_s, 7.0)
            T.copy(acc, C_s)  # stmatrix on sm_90a: a write through a pointer
            T.copy(C_s, C)

    return main


def test_a_matrix_store_over_a_fill_lands_last() -> None:
    # stmatrix names no owner thread for what it stores, so the plan orders it after the fill;
    # before, nothing did, and the emulator kept fill values (7) where the product was due
    kernel = compile_for(_fill_then_gemm_result(64, 64, 32), {"kind": "cuda", "arch": "sm_90a"})
    assert "stmatrix" in kernel.get_kernel_source()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    got = np.asarray(kernel(a, b)).astype(np.float32)
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), atol=0.1, rtol=0.02)


def _scatter(same_value: bool) -> T.PrimFunc:
    @T.prim_func
    def main(Idx: T.Tensor((64,), "int32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "float32")
            tx = T.get_thread_binding()
            # an index read from memory: the plan cannot tell which threads meet, so it orders
            # nothing between their writes (TVM's plan); the access check sees them meet
            S[Idx[tx]] = T.float32(7) if same_value else T.cast(tx, "float32")
            B[tx] = S[0]

    return main


def test_two_threads_writing_different_values_unordered_is_a_race(monkeypatch: pytest.MonkeyPatch) -> None:
    from tile.backends.cpu.simt import SimtRaceError

    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    kernel = compile_for(_scatter(same_value=False), {"kind": "cuda", "arch": "sm_80"})
    race = r"thread 1 writes offset [0-3], which thread 0 wrote with another value"
    with pytest.raises(SimtRaceError, match=race) as info:
        kernel(np.zeros(64, np.int32))  # bytes of element 0: 0.0 from thread 0, 1.0 from thread 1
    assert "S[Idx[tx]] =" in str(info.value)  # the kernel's line


def test_two_threads_writing_the_same_value_is_no_race(monkeypatch: pytest.MonkeyPatch) -> None:
    # every threadIdx.y group doing threadIdx.x's work stores this way (test_lang_thread_dims.py)
    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    kernel = compile_for(_scatter(same_value=True), {"kind": "cuda", "arch": "sm_80"})
    np.testing.assert_array_equal(np.asarray(kernel(np.zeros(64, np.int32))), np.full(64, 7, np.float32))
