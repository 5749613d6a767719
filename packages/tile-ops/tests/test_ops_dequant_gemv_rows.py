"""The dequantized GEMV on the CPU: blocks stream whole weight rows, several groups per step.

``configs.gemv_rows_config`` picks, for a target that runs a block on one core, steps of
several groups (all of K while the step's activations fit half the second-level cache) and
enough rows per block to fill the first-level cache. The kernel then scales each code where it
decodes it instead of each group's sum, and the integer formats take their two's complement
offset out of the codes (``quant._dot_byte_offset``). Checked against numpy for every format,
with and without zeros, ragged row counts, and steps that are neither one group nor all of K.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.ops
from tile.ir.backend import Capabilities
from tile.ops._src.configs import Tiling, dequant_config
from tile.ops._src.quant import BITS, dequant_gemv_kernel, values

CPU = Capabilities(
    1, 1024, 1 << 24, frozenset({"float32"}), 256, True, thread_binding=False, compute_units=2,
    cache_bytes=(32 << 10, 512 << 10, 32 << 20),
)
GPU = Capabilities(
    32, 1024, 228 << 10, frozenset({"float32"}), 128, True, thread_binding=True, compute_units=132,
    cache_bytes=(256 << 10, 50 << 20),
)


def test_cpu_steps_cover_whole_rows_and_fill_the_first_level_cache():
    # 4096 int4 codes are 2 KiB a row: 16 rows fill 32 KiB; the 16 KiB of activations fit
    cfg = dequant_config(CPU, 1, 4096, 128, 4)
    assert (cfg.block_K, cfg.block_N, cfg.threads) == (4096, 16, 16)
    # int2 rows are half as long: twice the rows
    assert dequant_config(CPU, 1, 4096, 128, 2).block_N == 32
    # short rows stop at 64 rows; long ones at 4
    assert dequant_config(CPU, 1, 256, 32, 4).block_N == 64
    assert dequant_config(CPU, 1, 1 << 16, 128, 4).block_N == 4
    # 65536 float32 activations take 256 KiB, half of L2: still one step
    assert dequant_config(CPU, 1, 1 << 16, 128, 4).block_K == 1 << 16
    # 131072 do not: the most of its 1024 groups (512 bytes of activations each) that divide
    # 1024 and fit 256 KiB is 512, two steps
    assert dequant_config(CPU, 1, 1 << 17, 128, 4).block_K == 1 << 16
    # 96 groups of 32 (K = 3072, 12 KiB) under a 16 KiB L2: at most 64 groups fit, and the
    # largest divisor of 96 up to that is 48
    small_l2 = Capabilities(1, 1024, 1 << 24, frozenset({"float32"}), 256, True, thread_binding=False,
                            compute_units=2, cache_bytes=(32 << 10, 16 << 10))
    assert dequant_config(small_l2, 1, 3072, 32, 4).block_K == 48 * 32
    # 86 groups (K = 11008): 86 divides itself and fits, so one step
    assert dequant_config(CPU, 1, 11008, 128, 4).block_K == 11008


def test_gpu_and_several_rows_keep_one_group_per_step():
    assert dequant_config(GPU, 1, 4096, 128, 4).block_K == 128
    assert dequant_config(CPU, 5, 4096, 128, 4).block_K == 128
    assert dequant_config(CPU, 1).block_K == 32  # no sizes given: the GEMM's tiling


def _problem(fmt: str, n: int, k: int, group: int, zeros: bool, seed: int = 3):
    rng = np.random.default_rng(seed)
    packed = tile.ops.pack_codes(rng.integers(0, 1 << BITS[fmt], size=(n, k)), fmt)
    scale = (rng.random((n, k // group)) + 0.5).astype("float32")
    zero = rng.standard_normal((n, k // group)).astype("float32") if zeros else None
    a = rng.standard_normal((1, k)).astype("float32")
    want = a.astype(np.float64) @ tile.ops.dequantize_reference(packed, fmt, scale, zero, group).T
    return a, packed, scale, zero, want


FORMS = [("int4", True), ("int4", False), ("int2", True), ("int2", False), ("nf4", False), ("fp4", False)]


@pytest.mark.parametrize("fmt,zeros", FORMS)
@pytest.mark.parametrize("step_groups", [1, 2, 8])  # one group; two of eight (4 steps); all of K
def test_gemv_steps_of_several_groups_match_numpy(fmt, zeros, step_groups):
    n, k, group = 20, 256, 32  # 20 rows: the second block of 16 is ragged
    a, packed, scale, zero, want = _problem(fmt, n, k, group, zeros)
    tiling = Tiling(1, 16, block_K=step_groups * group, num_stages=1, threads=16)
    func = dequant_gemv_kernel(n, k, fmt, group, True, zeros, "float32", "float32", tiling)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    placeholder = np.zeros((1, 1), "float32")
    got = kernel(a, packed, values(fmt), scale, zero if zeros else placeholder)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_the_op_on_the_cpu_takes_whole_rows_and_matches_numpy():
    # the library's own path: config from the CPU backend's capabilities, fp4 without scale
    for fmt, scaled in (("int4", True), ("fp4", False)):
        a, packed, scale, _, _ = _problem(fmt, 37, 512, 64, zeros=False, seed=5)
        want = a.astype(np.float64) @ tile.ops.dequantize_reference(
            packed, fmt, scale if scaled else None, None, 64).T
        got = tile.ops.dequant_matmul(a, packed, scale if scaled else None, None, fmt, 64)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
