"""TileLang names added for issue 19's coverage table: the ``tir`` submodule TileLang programs
import from, and the example-failure causes docs/compat.md lists. Each is checked against an
independent reference (TVM's own objects, numpy, hand-computed cases)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from tvm import tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu.simt.errors import SimtDeadlockError
from tile.testsupport.markers import needs_backend


def test_language_tir_submodules_reexport_tvms_builders():
    from tile.lang.language.tir import ir as tir_ir
    from tile.lang.language.tir import op as tir_op

    assert tir_ir.Shuffle is tirx.Shuffle
    assert "Shuffle" in tir_ir.__all__
    assert "dp4a" in tir_op.__all__
    vector = tirx.Var("v", "float16x2")
    lane = tir_op.Shuffle([vector], [1])
    assert lane.vectors[0].same_as(vector) and lane.indices[0].value == 1


def _expecting(tx_bytes: int):
    @T.prim_func
    def kernel(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            bar = T.alloc_barrier(16)
            tx = T.get_thread_binding(0)
            if tx == 0:
                T.mbarrier_expect_tx(bar[0], tx_bytes)
            T.mbarrier_arrive(bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
            B[tx] = A[15 - tx] + 1.0

    return kernel


@needs_backend("cuda")
def test_mbarrier_expect_tx_holds_the_phase_for_its_bytes_on_the_emulator(monkeypatch):
    # PTX: a phase completes when its pending arrivals AND its tx-count reach zero. With no
    # bytes expected the 16 arrivals complete it; 64 expected bytes that nothing delivers keep
    # it open, which the emulator reports as a deadlock.
    monkeypatch.setenv("TILE_DEVICE", "emu")
    target = {"kind": "cuda", "arch": "sm_90a"}
    a = np.arange(16, dtype="float32")
    released = tilelang.compile(_expecting(0), out_idx=[-1], target=target)
    np.testing.assert_array_equal(released(a), a[::-1] + 1)
    with pytest.raises(SimtDeadlockError):
        tilelang.compile(_expecting(64), out_idx=[-1], target=target)(a)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile CUDA")
@needs_backend("cuda")
def test_mbarrier_expect_tx_is_ptx_expect_tx_under_nvcc():
    kernel = tilelang.compile(_expecting(64), target={"kind": "cuda", "arch": "sm_90a"})
    assert "tile_mbarrier_expect_tx(" in kernel.get_kernel_source("cuda")
    sass = kernel.get_kernel_source("sass")
    # expect-tx is an arrive op with no arrival (A0) that adds to the tx-count (TR), guarded by
    # tx == 0; each thread's own arrive is A1T0 (one arrival, no bytes).
    assert "@!P0 SYNCS.ARRIVE.TRANS64.RED.A0TR" in " ".join(sass.split())
    assert "SYNCS.ARRIVE.TRANS64.A1T0" in sass
