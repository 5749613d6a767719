"""The SIMT emulator's scheduler: ids, shared memory, barriers, atomics, cp.async, faults.

Each kernel is plain CUDA C++ compiled by the host compiler against the emulator's
``tile_cuda.h``; results are checked against numpy.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _cpu_simt_support import launch, needs_cxx

from tile.backends.cpu.simt import SimtDeadlockError, SimtDivergenceError, SimtLaunchError, SimtMisuseError

pytestmark = needs_cxx

IDS = r"""
extern "C" __global__ void ids(int* out) {
  int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int* slot = out + 8 * (b * blockDim.x * blockDim.y * blockDim.z + t);
  slot[0] = threadIdx.x; slot[1] = threadIdx.y; slot[2] = threadIdx.z;
  slot[3] = blockIdx.x; slot[4] = blockIdx.y; slot[5] = blockIdx.z;
  slot[6] = tile::lane_id(); slot[7] = tile::warp_id();
}
"""


def test_every_thread_of_every_block_runs_once_with_its_ids():
    grid, block = (3, 2, 2), (16, 4, 2)
    threads = 16 * 4 * 2
    out = np.full((12 * threads, 8), -1, np.int32)
    launch(IDS, "ids", grid, block, out)
    rows = out.reshape(2, 2, 3, 2, 4, 16, 8)  # bz, by, bx, tz, ty, tx, field
    bz, by, bx, tz, ty, tx = np.indices(rows.shape[:-1])
    for field, want in enumerate((tx, ty, tz, bx, by, bz)):
        np.testing.assert_array_equal(rows[..., field], want)
    linear = tx + 16 * (ty + 4 * tz)
    np.testing.assert_array_equal(rows[..., 6], tx & 31)  # the header's lane_id is threadIdx.x & 31
    assert linear.max() == threads - 1


REDUCE = r"""
// Tree reduction in static shared memory: wrong without every barrier.
extern "C" __global__ void block_sum(const float* x, float* out) {
  __shared__ alignas(16) float partial[256];
  int t = threadIdx.x;
  partial[t] = x[blockIdx.x * 256 + t];
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// Dynamic shared memory, reversed through a barrier.
extern "C" __global__ void reverse(const int* x, int* y) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* s = (int*)smem;
  int t = threadIdx.x, n = blockDim.x;
  s[t] = x[blockIdx.x * n + t];
  __syncthreads();
  y[blockIdx.x * n + t] = s[n - 1 - t];
}

// Every block adds into one counter: the blocks run on several OS threads at once.
extern "C" __global__ void count(float* total, int* hits) {
  atomicAdd(total, 0.5f);
  tile::atomic_add(hits, 1);
  tile::atomic_max(hits + 1, (int)(blockIdx.x * blockDim.x + threadIdx.x));
}

// Unwritten shared memory reads as NaN bytes.
extern "C" __global__ void peek(unsigned* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  out[threadIdx.x] = ((unsigned*)smem)[threadIdx.x];
}
"""


def test_block_reduction_through_static_shared_memory():
    x = np.random.default_rng(0).standard_normal((37, 256)).astype(np.float32)
    out = np.zeros(37, np.float32)
    launch(REDUCE, "block_sum", (37, 1, 1), (256, 1, 1), x, out, workers=2)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_dynamic_shared_memory_is_per_block():
    x = np.arange(64 * 96, dtype=np.int32)
    y = np.zeros_like(x)
    launch(REDUCE, "reverse", (64, 1, 1), (96, 1, 1), x, y, shared=96 * 4, workers=2)
    np.testing.assert_array_equal(y.reshape(64, 96), x.reshape(64, 96)[:, ::-1])


def test_atomics_are_atomic_across_parallel_blocks():
    total = np.zeros(1, np.float32)
    hits = np.zeros(2, np.int32)
    launch(REDUCE, "count", (200, 1, 1), (64, 1, 1), total, hits, workers=4)
    assert hits[0] == 200 * 64 and total[0] == 200 * 64 * 0.5 and hits[1] == 200 * 64 - 1


def test_unwritten_shared_memory_is_poisoned():
    out = np.zeros(32, np.uint32)
    launch(REDUCE, "peek", (1, 1, 1), (32, 1, 1), out, shared=128)
    assert (out == 0xFFFFFFFF).all()


ASYNC = r"""
// cp.async lands at the wait that covers its group, never at issue.
extern "C" __global__ void groups(const int* src, int* seen) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* s = (int*)smem;
  int t = threadIdx.x;
  s[4 * t] = -1; s[4 * t + 4 * 32] = -1;
  tile_cp_async_16(&s[4 * t], &src[4 * t]);               // group 0
  tile_cp_async_commit();
  tile_cp_async_zfill_16(&s[4 * t + 128], &src[4 * t + 128], 8);  // group 1: 8 bytes, then zeros
  tile_cp_async_commit();
  seen[t * 4 + 0] = s[4 * t];                             // nothing landed yet
  tile_cp_async_wait<1>();
  seen[t * 4 + 1] = s[4 * t];                             // group 0 landed
  seen[t * 4 + 2] = s[4 * t + 128];                       // group 1 not yet
  tile_cp_async_wait<0>();
  seen[t * 4 + 3] = s[4 * t + 128] + s[4 * t + 128 + 2];  // landed: src value + zero fill
}

extern "C" __global__ void misaligned(const int* src) {
  extern __shared__ __align__(16) unsigned char smem[];
  tile_cp_async_16(smem + 4, src);
}
"""


def test_cp_async_lands_at_its_wait_group():
    src = np.arange(256, dtype=np.int32) + 1000
    seen = np.zeros((32, 4), np.int32)
    launch(ASYNC, "groups", (1, 1, 1), (32, 1, 1), src, seen, shared=1024)
    t = np.arange(32)
    np.testing.assert_array_equal(seen[:, 0], -1)
    np.testing.assert_array_equal(seen[:, 1], src[4 * t])
    np.testing.assert_array_equal(seen[:, 2], -1)
    np.testing.assert_array_equal(seen[:, 3], src[4 * t + 128])  # + 0 from the zero-filled half


def test_misaligned_cp_async_is_a_fault():
    src = np.zeros(16, np.int32)
    with pytest.raises(SimtMisuseError, match="aligned"):
        launch(ASYNC, "misaligned", (1, 1, 1), (32, 1, 1), src, shared=64)


NAMED = r"""
// Warp 1 produces into shared memory and arrives at barrier 1; warp 0 syncs on it.
extern "C" __global__ void producer_consumer(int* out) {
  __shared__ int box[32];
  int lane = threadIdx.x & 31;
  if (threadIdx.x >= 32) {
    box[lane] = 100 + lane;
    tile_simt_barrier(1, 64, 1, __LINE__);  // arrive, do not wait
  } else {
    tile_simt_barrier(1, 64, 0, __LINE__);  // wait for the 32 producers
    out[lane] = box[31 - lane];
  }
}
"""


def test_named_barrier_arrive_and_sync():
    out = np.zeros(32, np.int32)
    launch(NAMED, "producer_consumer", (3, 1, 1), (64, 1, 1), out, seed=7)
    np.testing.assert_array_equal(out, 100 + np.arange(32)[::-1])


def test_too_many_threads_is_a_launch_error():
    out = np.zeros(8 * 2048, np.int32)
    with pytest.raises(SimtLaunchError, match="1 to 1024"):
        launch(IDS, "ids", (1, 1, 1), (2048, 1, 1), out)


DEADLOCKS = textwrap.dedent(
    r'''
    import numpy as np, sys
    sys.path.insert(0, sys.argv[1])
    from _cpu_simt_support import launch
    from tile.backends.cpu.simt import SimtDeadlockError, SimtDivergenceError
    SOURCE = """
    extern "C" __global__ void half_sync(float* x) {
      if (threadIdx.x < 64) {
        __syncthreads();
      }
      x[threadIdx.x] = 1.0f;
    }
    extern "C" __global__ void two_syncs(float* x) {
      if (threadIdx.x < 64) {
        __syncthreads();
      } else {
        x[threadIdx.x] = 2.0f;
        __syncthreads();
      }
    }
    extern "C" __global__ void shuffle_in_branch(float* x) {
      float v = x[threadIdx.x];
      if ((threadIdx.x & 31) < 16) v += tile::shfl_xor(v, 1);
      x[threadIdx.x] = v;
    }
    """
    x = np.zeros(128, np.float32)
    for name, error in (("half_sync", SimtDeadlockError), ("two_syncs", SimtDivergenceError),
                        ("shuffle_in_branch", SimtDeadlockError)):
        try:
            launch(SOURCE, name, (4, 1, 1), (128, 1, 1), x)
        except error as exc:
            print(name, type(exc).__name__, str(exc).splitlines()[0])
        else:
            print(name, "no fault")
    '''
)


def test_barriers_that_cannot_complete_are_reported_not_hung(tmp_path):
    import os
    from pathlib import Path

    result = subprocess.run(
        [sys.executable, "-c", DEADLOCKS, str(Path(__file__).parent)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ},
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    # threads 64-127 exit without reaching the barrier that threads 0-63 wait at
    assert lines["half_sync"].startswith("SimtDeadlockError")
    assert "__syncthreads (line 5)" in lines["half_sync"] and "threads 0-63" in lines["half_sync"]
    assert "Threads 64-127 exited" in lines["half_sync"]
    # two barriers at different lines: divergence, naming both lines
    assert lines["two_syncs"].startswith("SimtDivergenceError")
    assert "line 11" in lines["two_syncs"] and "line 14" in lines["two_syncs"]
    # half a warp at a shuffle, the other half exited
    assert lines["shuffle_in_branch"].startswith("SimtDeadlockError")
    assert "warp shuffle" in lines["shuffle_in_branch"] and "lanes 0-15 arrived" in lines["shuffle_in_branch"]


def test_errors_are_tile_errors():
    from tile.layout.errors import TileError

    assert issubclass(SimtDeadlockError, TileError) and issubclass(SimtDivergenceError, TileError)
