"""Block barriers under a block-uniform condition: a block-masked GEMM.

The shape of TileLang's block-sparse attention example, which TVM's ThreadSync refused
("Cannot insert syncs inside condition"): inside a ``T.Pipelined`` loop, an ``if`` on a
block mask read from global memory (the same for every thread of the block) guards the
copies into shared memory and the gemm that reads them. The copy-to-gemm barrier belongs
inside the ``if``, and the barrier before the next step's copies overwrite what the gemm
read belongs at the top of the loop (tile.ir.gpu.barriers). Checked against numpy on every
installed target, the emulated sm_80, sm_90a and gfx90a included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.conformance.fuzz import installed_targets

TARGETS = {t.name: t for t in installed_targets()}
BM = BN = BK = 32


def _installed(target_name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The installed target of that name, its device selected (skips where it is missing)."""
    target = TARGETS.get(target_name)
    if target is None:
        pytest.skip(f"target {target_name} is not installed here")
    if target.device:
        monkeypatch.setenv("TILE_DEVICE", target.device)
    return target


def block_masked_gemm(m: int, n: int, k: int, stages: int):
    """C = the sum over k-blocks of A_blk @ B_blk where ``Mask[row block, col block, k block]``."""

    @T.prim_func
    def main(
        A: T.Tensor((m, k), "float16"),
        B: T.Tensor((k, n), "float16"),
        Mask: T.Tensor((m // BM, n // BN, k // BK), "bool"),
        C: T.Tensor((m, n), "float32"),
    ):
        with T.Kernel(n // BN, m // BM, threads=128) as (bx, by):
            A_s = T.alloc_shared((BM, BK), "float16")
            B_s = T.alloc_shared((BK, BN), "float16")
            C_f = T.alloc_fragment((BM, BN), "float32")
            T.clear(C_f)
            for kb in T.Pipelined(k // BK, num_stages=stages):
                if Mask[by, bx, kb]:
                    T.copy(A[by * BM, kb * BK], A_s)
                    T.copy(B[kb * BK, bx * BN], B_s)
                    T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * BM, bx * BN])

    return main


def _expected(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0], b.shape[1]))
    for i, j, kb in zip(*np.nonzero(mask), strict=True):
        rows, cols = slice(i * BM, (i + 1) * BM), slice(j * BN, (j + 1) * BN)
        ks = slice(kb * BK, (kb + 1) * BK)
        out[rows, cols] += a[rows, ks].astype(np.float64) @ b[ks, cols].astype(np.float64)
    return out


@pytest.mark.parametrize("target_name", ["cpu", "cuda-emu-sm_80", "cuda-emu-sm_90a", "rocm-emu-gfx90a"])
def test_block_masked_pipelined_gemm(target_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _installed(target_name, monkeypatch)
    m, n, k = 64, 64, 128
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    mask = rng.random((m // BM, n // BN, k // BK)) < 0.5
    mask[0, 0, :] = False  # a block with no k-block at all: the gemm never runs there
    mask[1, 1, :] = True
    kernel = tilelang.compile(block_masked_gemm(m, n, k, stages=2), target=target.target)
    c = np.zeros((m, n), np.float32)
    kernel(a, b, mask, c)
    np.testing.assert_allclose(c, _expected(a, b, mask), rtol=1e-3, atol=1e-3)


def mask_row_sum(n: int):
    """Y[b] = the sum of the rows X[b, k] whose mask bit is set, the mask copied into a fragment.

    ``if m[k]:`` in a serial loop reads the fragment on every thread (TileLang's block-sparse
    attention copies its mask row this way): every thread must hold the whole mask.
    """

    @T.prim_func
    def main(
        Mask: T.Tensor((2, n), "bool"), X: T.Tensor((2, n, 128), "float32"), Y: T.Tensor((2, 128), "float32")
    ):
        with T.Kernel(2, threads=128) as bx:
            m = T.alloc_fragment((n,), "bool")
            acc = T.alloc_fragment((128,), "float32")
            T.copy(Mask[bx, :], m)
            T.clear(acc)
            for k in T.serial(n):
                if m[k]:
                    for i in T.Parallel(128):
                        acc[i] = acc[i] + X[bx, k, i]
            T.copy(acc, Y[bx, :])

    return main


@pytest.mark.parametrize("target_name", ["cpu", "cuda-emu-sm_80", "rocm-emu-gfx90a"])
def test_a_mask_fragment_read_in_a_serial_loop(target_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _installed(target_name, monkeypatch)
    rng = np.random.default_rng(3)
    mask = np.array([[True, False, True, True], [False, True, False, False]])
    x = rng.standard_normal((2, 4, 128)).astype(np.float32)
    y = np.zeros((2, 128), np.float32)
    tilelang.compile(mask_row_sum(4), target=target.target)(mask, x, y)
    np.testing.assert_allclose(y, (x * mask[:, :, None]).sum(1), rtol=1e-5, atol=1e-5)


def gather_row_blocks(rows: int, n_blocks: int, block: int):
    """B[:, j-th block] = A[Idx[j]:Idx[j] + block, :block] where ``Idx[j] >= 0`` (TileLang's
    let_layout test): the index row is copied into a fragment and read into a named value,
    which every thread uses as the copy's row and in the ``if``."""

    @T.prim_func
    def main(
        A: T.Tensor((rows, block), "float16"),
        Idx: T.Tensor((n_blocks,), "int32"),
        B: T.Tensor((block, n_blocks * block), "float16"),
    ):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((block, block), "float16")
            idx = T.alloc_fragment((n_blocks,), "int32")
            T.copy(Idx[0:n_blocks], idx)
            for j in T.Pipelined(n_blocks, num_stages=0):
                row = idx[j]
                if row >= 0:
                    T.copy(A[row, 0], A_s)
                    T.copy(A_s, B[0, j * block])

    return main


@pytest.mark.parametrize("target_name", ["cpu", "cuda-emu-sm_80", "cuda-emu-sm_90a"])
def test_a_named_fragment_element_as_a_copy_row(target_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: LayoutInferenceError (the index fragment was spread over the threads, each
    # holding one element, while every thread needs each element in turn)
    target = _installed(target_name, monkeypatch)
    block, n_blocks = 32, 3
    a = np.random.default_rng(11).standard_normal((4 * block, block)).astype(np.float16)
    starts = np.array([2 * block, -1, 5], np.int32)
    b = np.zeros((block, n_blocks * block), np.float16)
    tilelang.compile(gather_row_blocks(4 * block, n_blocks, block), target=target.target)(a, starts, b)
    want = np.zeros_like(b)
    for j, start in enumerate(starts):
        if start >= 0:
            want[:, j * block : (j + 1) * block] = a[start : start + block]
    np.testing.assert_array_equal(b, want)
