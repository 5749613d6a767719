"""Faults the SIMT emulator exposes: shuffled thread orders and poisoned uninitialised registers.

Each kernel has a bug that the emulator's plain round-robin order, or zeroed memory,
would hide; the test shows the feature turns it into a wrong result.
"""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_simt_support import launch, needs_cxx

pytestmark = needs_cxx

ORDER = r"""
// Thread t reads the slot thread t - 1 wrote, with no barrier in between: correct only
// when threads run in index order.
extern "C" __global__ void neighbour(int* out) {
  __shared__ int slot[128];
  int t = threadIdx.x;
  slot[t] = 10 * t + 1;
  out[blockIdx.x * 128 + t] = t > 0 ? slot[t - 1] : 1;
}
"""


def _neighbour_wrong(seed_env: str | None, monkeypatch: pytest.MonkeyPatch) -> bool:
    if seed_env is None:
        monkeypatch.delenv("TILE_EMU_SEED", raising=False)
    else:
        monkeypatch.setenv("TILE_EMU_SEED", seed_env)
    out = np.zeros(4 * 128, np.int32)
    launch(ORDER, "neighbour", (4, 1, 1), (128, 1, 1), out)
    t = np.arange(128)
    want = np.tile(np.where(t > 0, 10 * (t - 1) + 1, 1), 4)
    return not np.array_equal(out, want)


def test_round_robin_order_hides_the_missing_barrier(monkeypatch):
    assert not _neighbour_wrong(None, monkeypatch)
    assert not _neighbour_wrong("0", monkeypatch)


def test_tile_emu_seed_shuffles_thread_order(monkeypatch):
    assert any(_neighbour_wrong(str(seed), monkeypatch) for seed in (1, 2, 3))


UNINITIALISED = r"""
// Only the first `n` accumulators are set; the rest are read uninitialised.
extern "C" __global__ void partial_init(float* out, int n) {
  float acc[8];
  for (int i = 0; i < n; ++i) acc[i] = (float)i;
  for (int i = 0; i < 8; ++i) out[(blockIdx.x * blockDim.x + threadIdx.x) * 8 + i] = acc[i];
}
"""


def test_uninitialised_fragment_registers_read_as_nan():
    out = np.zeros((64, 8), np.float32)
    launch(UNINITIALISED, "partial_init", (2, 1, 1), (32, 1, 1), out, 5)
    np.testing.assert_array_equal(out[:, :5], np.tile(np.arange(5, dtype=np.float32), (64, 1)))
    assert np.isnan(out[:, 5:]).all()
