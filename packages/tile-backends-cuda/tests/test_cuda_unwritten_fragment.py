"""A fragment that no statement writes, read through a named index, compiles and runs.

TileLang's layout_fused_replicate test reads such a fragment (``idx = i * K + j;
out[...] = f[idx // V, idx % V]``) to check that layout inference accepts the fused
index. TVM's buffer compaction then stopped CUDA and HIP code generation ("Buffer idx is
used before its definition"); tile-ir's test_ir_gpu_unwritten_reads.py checks the rewrite
that avoids it. The values read are undefined, so this checks that the kernel compiles
for each target and that the rest of the kernel's output is right.
"""

from __future__ import annotations

import numpy as np
import pytest
from _emu_targets import TARGETS, compile_for

import tile.lang.language as T

pytestmark = pytest.mark.emu

_SM90A = pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="cuda-sm_90a")


def _fused_index(rows: int, cols: int, vec: int) -> T.PrimFunc:
    @T.prim_func
    def main(a: T.Tensor((rows, cols), "float32"), out: T.Tensor((2, rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            never = T.alloc_fragment((rows * cols // vec, vec), "float32")
            for i, j in T.Parallel(rows, cols):
                idx = i * cols + j
                out[0, i, j] = never[idx // vec, idx % vec]
                out[1, i, j] = a[i, j] * 2.0

    return main


@pytest.mark.parametrize("target", [*TARGETS, _SM90A])
def test_a_never_written_fragment_read_through_a_named_index(target: dict[str, str]) -> None:
    kernel = compile_for(_fused_index(32, 64, 32), target)
    a = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    out = np.asarray(kernel(a))
    assert out.shape == (2, 32, 64)
    np.testing.assert_array_equal(out[1], a * 2.0)
