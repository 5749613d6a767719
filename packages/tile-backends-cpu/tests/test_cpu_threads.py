"""The CPU backend sizes TVM's worker pool: one worker per physical core, overridable."""

import os
import subprocess
import sys

from tile.backends.cpu._src.backend import physical_cores

# A fresh process per case: TVM's pool is created once per calling thread.
PROBE = """
import numpy as np
import tile.lang as tilelang
import tile.lang.language as T
from tvm.runtime import _ffi_api

@T.prim_func
def twice(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(8, threads=128) as bx:
        for i, j in T.Parallel(8, 64):
            B[bx * 8 + i, j] = A[bx * 8 + i, j] * 2.0

kern = tilelang.compile(twice, out_idx=[-1], target="cpu")
a = np.arange(64 * 64, dtype="float32").reshape(64, 64)
np.testing.assert_array_equal(kern(a), 2 * a)
print(_ffi_api.NumThreads())
"""


CASES = {
    # TVM alone would halve hardware_concurrency on x86 (1 worker on a 2-core VM)
    "default": ({}, None),
    "tile_cpu_num_threads": ({"TILE_CPU_NUM_THREADS": "1"}, 1),
    "tvm_num_threads_wins": ({"TVM_NUM_THREADS": "1", "TILE_CPU_NUM_THREADS": "2"}, 1),
}


def test_pool_size_default_and_overrides(tmp_path):
    # the three probes run side by side (each mostly imports torch and tvm): one test's wall time
    script = tmp_path / "probe.py"  # tile parses the kernel's source, so it needs a file
    script.write_text(PROBE)
    base = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    base.pop("TILE_CPU_NUM_THREADS", None)
    running = {
        name: subprocess.Popen(
            [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**base, **overrides},
        )
        for name, (overrides, _want) in CASES.items()
    }
    got = {}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: {err[-2000:]}"
        got[name] = int(out.split()[-1])
    cores = physical_cores(sorted(os.sched_getaffinity(0)))
    assert got == {name: (cores if want is None else want) for name, (_o, want) in CASES.items()}


def test_physical_cores_counts_each_core_once():
    cpus = sorted(os.sched_getaffinity(0))
    assert 1 <= physical_cores(cpus) <= len(cpus)
    # Without topology files (no such CPUs) every logical CPU counts.
    assert physical_cores([10_000, 10_001, 10_002]) == 3
    assert physical_cores([]) == 1
