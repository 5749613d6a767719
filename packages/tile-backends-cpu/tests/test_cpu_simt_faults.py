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


def test_uninitialised_fragment_registers_read_as_poison():
    out = np.zeros((64, 8), np.float32)
    launch(UNINITIALISED, "partial_init", (2, 1, 1), (32, 1, 1), out, 5)
    np.testing.assert_array_equal(out[:, :5], np.tile(np.arange(5, dtype=np.float32), (64, 1)))
    bits = out[:, 5:].view(np.uint32)
    assert np.isin(bits, [0xFEFEFEFE, 0xFFFFFFFF]).all()  # the compiler's pattern, or the stack's


REGISTER_SCALAR = r"""
// A one-element fragment only the first `writers` threads load (kept in a register), then
// every thread adds it: the shape of a lowering that forgets which threads own a fragment.
extern "C" __global__ void partial_scalar(const int* x, int* total, int writers) {
  alignas(64) int frag[1];
  if ((int)threadIdx.x < writers) frag[0] = x[threadIdx.x];
  tile::atomic_add(total, frag[0]);
}
"""


def test_uninitialised_register_fragment_reads_the_poison_pattern():
    from tile.backends.cpu import toolchain
    from tile.backends.cpu.simt._toolchain import POISON_FLAG

    if not toolchain.accepts_flag(toolchain.find_host_compiler(), POISON_FLAG):
        pytest.skip("the host compiler has no -ftrivial-auto-var-init=pattern")
    x = np.arange(1, 33, dtype=np.int32)
    total = np.zeros(1, np.int32)
    launch(REGISTER_SCALAR, "partial_scalar", (1, 1, 1), (32, 1, 1), x, total, 32)
    assert total[0] == x.sum()
    total[0] = 0
    launch(REGISTER_SCALAR, "partial_scalar", (1, 1, 1), (32, 1, 1), x, total, 8)
    # the 24 threads that own nothing add the pattern 0xfefefefe (int32 arithmetic wraps)
    want = np.array(int(x[:8].sum()) + 24 * -16843010, np.int64).astype(np.int32)
    assert total[0] == want
