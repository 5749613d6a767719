"""The race check of TILE_EMU_CHECK orders a shared-memory write before a read only through a
synchronisation both threads take part in (vector clocks), not through any synchronisation of
the block: a named barrier of warps 0-1 orders nothing for warp 2, an mbarrier phase orders its
arrivers before its waiters, and orders chain (warp 0 -> warp 1 -> warp 2).

Each kernel runs in FIFO order (no seed): warp 0 writes first and the read comes after the
write in execution order, so a read the synchronisation does not order is reported. The same
reads were let through before, because another group's synchronisation had completed in
between (a block-wide epoch).
"""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_simt_support import build, needs_cxx

from tile.backends.cpu.simt import SimtRaceError

pytestmark = needs_cxx

SOURCE = r"""
// Warps 0-1 meet at named barrier 1, warps 2-3 at named barrier 2; warp 0 wrote first.
extern "C" __global__ void named_groups(int* out, int reader) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* s = (int*)smem;
  int t = threadIdx.x;
  if (t < 32) s[t] = t + 100;
  if (t < 64) tile_named_barrier_sync(1, 64);
  else tile_named_barrier_sync(2, 64);
  if (t == reader) out[0] = s[reader & 31];  // (an index the compiler cannot fold: checked)
}

// Warp 0 writes and arrives on an mbarrier (32 arrivals); warp 1 waits for the phase when
// `wait` is 1, then reads; warp 1 then arrives on a second mbarrier that warp 2 waits for
// before it reads warp 0's data too (the order chains through warp 1).
extern "C" __global__ void producer_consumer(int* out, int wait) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned long long* bars = (unsigned long long*)smem;
  int* s = (int*)(smem + 16);
  int t = threadIdx.x;
  if (t == 0) {
    tile_mbarrier_init(&bars[0], 32);
    tile_mbarrier_init(&bars[1], 32);
  }
  __syncthreads();
  if (t < 32) {
    s[t] = 7 * t;
    tile_mbarrier_arrive(&bars[0]);
  } else if (t < 64) {
    if (wait) tile_mbarrier_wait(&bars[0], 0);
    out[t - 32] = s[t - 32];
    tile_mbarrier_arrive(&bars[1]);
  } else {
    tile_mbarrier_wait(&bars[1], 0);
    out[t - 32] = s[t - 64];
  }
}

// bar.arrive by the producing warp, bar.sync by the consuming one: the producer's writes
// before its arrival are ordered before the consumer's reads after its wait.
extern "C" __global__ void arrive_then_sync(int* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* s = (int*)smem;
  int t = threadIdx.x;
  if (t < 32) {
    s[t] = t * t;
    tile_named_barrier_arrive(3, 64);
  } else {
    tile_named_barrier_sync(3, 64);
    out[t - 32] = s[63 - t];
  }
}

// Lanes of one warp through shared memory, ordered by __syncwarp when `sync` is 1.
extern "C" __global__ void within_a_warp(int* out, int sync) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* s = (int*)smem;
  int t = threadIdx.x;
  s[t] = t + 1;
  if (sync) __syncwarp();
  out[t] = s[t ^ 1];
}
"""


def _run(name: str, block: int, out: np.ndarray, *scalars: int) -> None:
    import ctypes

    holders = [ctypes.c_void_p(out.ctypes.data), *[ctypes.c_int32(v) for v in scalars]]
    kernel = build(SOURCE, name)
    kernel.launch((1, 1, 1), (block, 1, 1), 4096, holders)


def _checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    monkeypatch.delenv("TILE_EMU_SEED", raising=False)


def test_a_named_barrier_orders_only_its_own_threads(monkeypatch):
    _checked(monkeypatch)
    out = np.zeros(1, np.int32)
    _run("named_groups", 128, out, 40)  # warp 1 met warp 0 at barrier 1
    assert out[0] == 108
    with pytest.raises(SimtRaceError, match=r"thread 127 reads offset 124, which thread 31 wrote"):
        _run("named_groups", 128, out, 127)  # warp 3 met only warp 2


def test_an_mbarrier_phase_orders_arrivers_before_waiters_and_orders_chain(monkeypatch):
    _checked(monkeypatch)
    out = np.zeros(64, np.int32)
    _run("producer_consumer", 96, out, 1)
    np.testing.assert_array_equal(out, np.tile(7 * np.arange(32), 2))
    # warp 1 reading without its wait: the phase completed (warp 0 arrived) but warp 1 never
    # waited for it
    with pytest.raises(SimtRaceError, match=r"thread 32 reads offset 16, which thread 0 wrote"):
        _run("producer_consumer", 96, out, 0)


def test_bar_arrive_releases_to_the_threads_that_sync(monkeypatch):
    _checked(monkeypatch)
    out = np.zeros(32, np.int32)
    _run("arrive_then_sync", 64, out)
    np.testing.assert_array_equal(out, (31 - np.arange(32)) ** 2)


def test_syncwarp_orders_lanes_of_a_warp(monkeypatch):
    _checked(monkeypatch)
    out = np.zeros(32, np.int32)
    _run("within_a_warp", 32, out, 1)
    np.testing.assert_array_equal(out, (np.arange(32) ^ 1) + 1)
    with pytest.raises(SimtRaceError, match="race on shared memory"):
        _run("within_a_warp", 32, out, 0)
