"""bfloat16 and paired half types in the emulator's CUDA dialect (cuda_bf16.h / cuda_fp16.h names).

Reference roundings are computed here from the float bits (round to nearest even, or
truncation for the _rz form), independently of the header.
"""

from __future__ import annotations

import numpy as np
from _cpu_simt_support import launch, needs_cxx

pytestmark = needs_cxx

BF16 = r"""
extern "C" __global__ void bf16_ops(const float* a, const float* b, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 x = __float2bfloat16(a[i]), y = __float2bfloat16(b[i]);
  out[8 * i + 0] = __bfloat16_as_ushort(__hmax(x, y));
  out[8 * i + 1] = __bfloat16_as_ushort(__hgt(x, y) ? x : y);
  out[8 * i + 2] = __bfloat16_as_ushort(__hadd(x, y));
  out[8 * i + 3] = __bfloat16_as_ushort(__float2bfloat16_rz(a[i]));
  __nv_bfloat162 p = __nv_bfloat162(x, y) * make_bfloat162(y, x);
  out[8 * i + 4] = __bfloat16_as_ushort(p.x);
  __half2 ones_twos = __half2(__float2half(1.0f), __float2half(2.0f));
  __half2 h = __hadd2(make_half2(__float2half(a[i]), __float2half(b[i])), ones_twos);
  out[8 * i + 5] = __half_as_ushort(h.x);
  out[8 * i + 6] = __half_as_ushort(h.y);
  out[8 * i + 7] = __bfloat16_as_ushort(__habs(__hneg(x)));
}
"""


def bf16_rne(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_bfloat16_and_paired_half_operations():
    rng = np.random.default_rng(4)
    n = 200
    a = (rng.standard_normal(n) * 3).astype(np.float32)
    b = (rng.standard_normal(n) * 3).astype(np.float32)
    out = np.zeros((n, 8), np.uint16)
    launch(BF16, "bf16_ops", (4, 1, 1), (64, 1, 1), a, b, out, n)
    x, y = bf16_value(bf16_rne(a)), bf16_value(bf16_rne(b))
    np.testing.assert_array_equal(out[:, 0], bf16_rne(np.maximum(x, y)))
    np.testing.assert_array_equal(out[:, 1], bf16_rne(np.where(x > y, x, y)))
    np.testing.assert_array_equal(out[:, 2], bf16_rne(x + y))
    np.testing.assert_array_equal(out[:, 3], (a.view(np.uint32) >> 16).astype(np.uint16))
    np.testing.assert_array_equal(out[:, 4], bf16_rne(x * y))
    ha, hb = a.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out[:, 5], (ha + 1.0).astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(out[:, 6], (hb + 2.0).astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(out[:, 7], bf16_rne(np.abs(x)))
