"""sm_90 under the SIMT emulator: wgmma through matrix descriptors, mbarriers, TMA, proxy fences.

Hand-written CUDA kernels run against the emulator's ``tile_cuda/hopper.h``. The shared
operand images are laid out by the independent PTX reference model (``isa_tables``:
canonical layouts, the swizzle function, the wgmma fragments, the TMA placement), so a
wrong descriptor decode, swizzle or fragment map in the emulator gives a wrong product.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest
from _cpu_simt_support import build, needs_cxx

from tile.backends.cpu.simt import (
    SimtDeadlockError,
    SimtLaunchError,
    SimtMisuseError,
    TensorMapArgument,
    encode_tensor_map,
)
from tile.testsupport import isa_tables as isa

pytestmark = needs_cxx

WGMMA = r"""
// Copies a shared image in, runs one m64n64k16 wgmma (case picks majors, ss/rs, f16/bf16; or
// an m64n64k32 one on e4m3/e5m2)
// with the given descriptor fields, and writes each thread's 32 accumulators out.
extern "C" __global__ void wgmma_case(const unsigned char* image, int bytes, const unsigned short* a_regs,
                                      float* d_out, unsigned long long* descs, int which,
                                      int a_lbo, int a_sbo, int a_swz, int b_lbo, int b_sbo, int b_swz) {
  extern __shared__ __align__(1024) unsigned char smem[];
  int t = threadIdx.x;
  for (int i = t; i < bytes; i += blockDim.x) smem[i] = image[i];
  tile_fence_proxy_async();
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 1.0f;  // scale_d = 1: the product is added to ones
  unsigned long long da = tile_wgmma_desc(smem, a_lbo, a_sbo, a_swz);
  unsigned long long db = tile_wgmma_desc(smem + 16384, b_lbo, b_sbo, b_swz);
  if (t == 0) { descs[0] = da; descs[1] = db; }
  const void* regs = a_regs + 8 * t;
  tile_wgmma_fence();
  switch (which) {
    case 0: tile_wgmma_m64n64k16_ss_f16_f32<0, 0>(d, da, db, 1); break;
    case 1: tile_wgmma_m64n64k16_ss_f16_f32<1, 0>(d, da, db, 1); break;
    case 2: tile_wgmma_m64n64k16_ss_f16_f32<0, 1>(d, da, db, 1); break;
    case 3: tile_wgmma_m64n64k16_ss_f16_f32<1, 1>(d, da, db, 1); break;
    case 4: tile_wgmma_m64n64k16_rs_f16_f32<0>(d, regs, db, 1); break;
    case 5: tile_wgmma_m64n64k16_rs_f16_f32<1>(d, regs, db, 1); break;
    case 6: tile_wgmma_m64n64k16_ss_bf16_f32<0, 1>(d, da, db, 1); break;
    case 7: tile_wgmma_m64n64k32_ss_e4m3_f32<0, 0>(d, da, db, 1); break;
    case 8: tile_wgmma_m64n64k32_ss_e5m2_f32<0, 0>(d, da, db, 1); break;
  }
  tile_wgmma_commit();
  tile_wgmma_wait<0>();
  for (int i = 0; i < 32; ++i) d_out[t * 32 + i] = d[i];
}
"""

ASYNC_GROUPS = r"""
// Two committed groups: wait<1> completes only the older one; registers read before the
// covering wait still hold their old values.
extern "C" __global__ void groups(const unsigned char* image, int bytes, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  int t = threadIdx.x;
  for (int i = t; i < bytes; i += blockDim.x) smem[i] = image[i];
  tile_fence_proxy_async();
  __syncthreads();
  float d1[4], d2[4];
  for (int i = 0; i < 4; ++i) { d1[i] = 5.0f; d2[i] = 7.0f; }
  unsigned long long da = tile_wgmma_desc(smem, 128, 256, 0);
  unsigned long long db = tile_wgmma_desc(smem + 16384, 128, 256, 0);
  tile_wgmma_fence();
  tile_wgmma_m64n8k16_ss_f16_f32<0, 0>(d1, da, db, 0);
  tile_wgmma_commit();
  float before1 = d1[0];
  tile_wgmma_m64n8k16_ss_f16_f32<0, 0>(d2, da, db, 0);
  tile_wgmma_commit();
  tile_wgmma_wait<1>();
  float mid1 = d1[0], mid2 = d2[0];
  tile_wgmma_wait<0>();
  out[t * 5 + 0] = before1;
  out[t * 5 + 1] = mid1;
  out[t * 5 + 2] = mid2;
  out[t * 5 + 3] = d1[0];
  out[t * 5 + 4] = d2[0];
}
"""


def _operand_layout(major: str, swizzle: int, rows: int) -> tuple[int, int]:
    """(LBO, SBO) in bytes of a dense ``rows x 16`` f16 operand in the canonical layout."""
    if major == "K":
        if swizzle == 0:
            return 128, 256  # K-adjacent core matrices 128 B apart, 8-row groups 256 B apart
        return 16, 8 * swizzle  # LBO unused; 8 rows of one swizzle row each
    if swizzle == 0:
        return 8 * 128 * (rows // 8), 128  # MN core matrices 128 B apart, then the second K group
    atom = 8 * swizzle
    return 2 * atom, atom  # both K groups of an atom, then the next MN atom


def _place(
    image: np.ndarray, base: int, matrix: np.ndarray, major: str, swizzle: int, lbo: int, sbo: int
) -> None:
    """Writes ``matrix`` (mn x 16, uint16 bits) into ``image`` where wgmma reads it (isa_tables)."""
    seen = set()
    for mn, k in itertools.product(range(matrix.shape[0]), range(16)):
        addr = isa.wgmma_smem_addr(base, major, swizzle, mn, k, 16, lbo, sbo)
        assert addr not in seen and base <= addr < base + 16384
        seen.add(addr)
        image[addr : addr + 2] = np.frombuffer(matrix[mn, k].tobytes(), np.uint8)


def _accumulators(d_out: np.ndarray, n: int) -> np.ndarray:
    got = np.zeros((64, n), np.float32)
    for tid, i in itertools.product(range(128), range(n // 2)):
        m, col = isa.wgmma_d(tid, i, n)
        got[m, col] = d_out[tid, i]
    return got


def _run_wgmma(which: int, a_major: str, a_swz: int, b_major: str, b_swz: int, dtype: str = "float16"):
    rng = np.random.default_rng(which * 1000 + a_swz + b_swz)
    a = rng.standard_normal((64, 16)).astype(np.float32)
    b = rng.standard_normal((16, 64)).astype(np.float32)
    if dtype == "float16":
        a_bits, b_bits = a.astype(np.float16).view(np.uint16), b.astype(np.float16).view(np.uint16)
        a, b = a.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32)
    else:  # bf16: truncate the float bits (values chosen exactly representable)
        a_bits = (a.view(np.uint32) >> 16).astype(np.uint16)
        b_bits = (b.view(np.uint32) >> 16).astype(np.uint16)
        a = (a_bits.astype(np.uint32) << 16).view(np.float32)
        b = (b_bits.astype(np.uint32) << 16).view(np.float32)
    image = np.zeros(32768, np.uint8)
    a_lbo, a_sbo = _operand_layout(a_major, a_swz, 64)
    b_lbo, b_sbo = _operand_layout(b_major, b_swz, 64)
    _place(image, 0, a_bits, a_major, a_swz, a_lbo, a_sbo)
    _place(image, 16384, b_bits.T.copy(), b_major, b_swz, b_lbo, b_sbo)  # B as (n, k)
    regs = np.zeros((128, 8), np.uint16)
    for tid, i in itertools.product(range(128), range(8)):
        m, k = isa.wgmma_a_f16(tid, i)
        regs[tid, i] = a_bits[m, k]
    d_out = np.zeros((128, 32), np.float32)
    descs = np.zeros(2, np.uint64)
    args = [image, 32768, regs, d_out, descs, which, a_lbo, a_sbo, a_swz, b_lbo, b_sbo, b_swz]
    holders = [
        ctypes.c_void_p(x.ctypes.data) if isinstance(x, np.ndarray) else ctypes.c_int32(x) for x in args
    ]
    build(WGMMA, "wgmma_case").launch((1, 1, 1), (128, 1, 1), 32768, holders)
    return _accumulators(d_out, 64), 1.0 + a @ b, descs, (a_lbo, a_sbo, b_lbo, b_sbo)


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize(
    ("which", "a_major", "b_major"), [(0, "K", "K"), (1, "MN", "K"), (2, "K", "MN"), (3, "MN", "MN")]
)
def test_wgmma_reads_every_canonical_layout_through_its_descriptor(which, a_major, b_major, swizzle):
    got, want, descs, (a_lbo, a_sbo, b_lbo, b_sbo) = _run_wgmma(which, a_major, swizzle, b_major, swizzle)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert int(descs[0]) == isa.wgmma_desc_encode(0, a_lbo, a_sbo, swizzle)
    assert int(descs[1]) == isa.wgmma_desc_encode(16384, b_lbo, b_sbo, swizzle)


@pytest.mark.parametrize(("which", "b_major"), [(4, "K"), (5, "MN")])
def test_wgmma_register_a_uses_the_fragment_layout(which, b_major):
    got, want, _, _ = _run_wgmma(which, "K", 128, b_major, 128)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_wgmma_bf16_inputs():
    got, want, _, _ = _run_wgmma(6, "K", 64, "MN", 128, dtype="bfloat16")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize(("which", "dtype"), [(7, "float8_e4m3fn"), (8, "float8_e5m2")])
def test_wgmma_fp8_reads_k_major_operands_of_bytes(which, dtype, swizzle):
    # m64n64k32: 32 one-byte elements of K per row, the same 32 bytes as k16 of f16, placed by
    # the reference model with 8-bit elements; codes drawn from all the finite ones
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(which + swizzle)

    def value(bits: np.ndarray) -> np.ndarray:
        return torch.from_numpy(bits).view(getattr(torch, dtype)).double().numpy()

    codes = np.arange(256, dtype=np.uint8)
    finite = codes[np.isfinite(value(codes))]
    a_bits = rng.choice(finite, (64, 32))
    b_bits = rng.choice(finite, (64, 32))  # B as (n, k)
    image = np.zeros(32768, np.uint8)
    lbo, sbo = _operand_layout("K", swizzle, 64)
    for base, bits in ((0, a_bits), (16384, b_bits)):
        for mn, k in itertools.product(range(64), range(32)):
            image[isa.wgmma_smem_addr(base, "K", swizzle, mn, k, 8, lbo, sbo)] = bits[mn, k]
    d_out = np.zeros((128, 32), np.float32)
    args = [image, 32768, np.zeros(1024, np.uint16), d_out, np.zeros(2, np.uint64), which, lbo, sbo, swizzle,
            lbo, sbo, swizzle]  # fmt: skip
    holders = [
        ctypes.c_void_p(x.ctypes.data) if isinstance(x, np.ndarray) else ctypes.c_int32(x) for x in args
    ]
    build(WGMMA, "wgmma_case").launch((1, 1, 1), (128, 1, 1), 32768, holders)
    want = 1.0 + value(a_bits) @ value(b_bits).T
    np.testing.assert_allclose(_accumulators(d_out, 64), want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_a_wrong_swizzle_mode_reads_a_permuted_operand():
    # B laid out with the 128B swizzle but described as 64B: the product must be wrong
    got, want, _, _ = _run_wgmma(2, "K", 128, "MN", 128)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 16)).astype(np.float16)
    b = rng.standard_normal((16, 64)).astype(np.float16)
    image = np.zeros(32768, np.uint8)
    _place(image, 0, a.view(np.uint16), "K", 128, *_operand_layout("K", 128, 64))
    _place(image, 16384, b.view(np.uint16).T.copy(), "MN", 128, *_operand_layout("MN", 128, 64))
    d_out = np.zeros((128, 32), np.float32)
    regs = np.zeros((128, 8), np.uint16)
    descs = np.zeros(2, np.uint64)
    b_lbo, b_sbo = _operand_layout("MN", 128, 64)
    args = [image, 32768, regs, d_out, descs, 2, 16, 1024, 128, b_lbo, b_sbo, 64]
    holders = [
        ctypes.c_void_p(x.ctypes.data) if isinstance(x, np.ndarray) else ctypes.c_int32(x) for x in args
    ]
    build(WGMMA, "wgmma_case").launch((1, 1, 1), (128, 1, 1), 32768, holders)
    wrong = _accumulators(d_out, 64)
    exact = 1.0 + a.astype(np.float32) @ b.astype(np.float32)
    assert np.abs(wrong - exact).max() > 1.0


def test_wgmma_results_land_at_the_covering_wait():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    image = np.zeros(32768, np.uint8)
    _place(image, 0, a.view(np.uint16), "K", 0, 128, 256)
    _place(image, 16384, b.view(np.uint16).T.copy(), "K", 0, 128, 256)
    out = np.zeros((128, 5), np.float32)
    holders = [ctypes.c_void_p(image.ctypes.data), ctypes.c_int32(32768), ctypes.c_void_p(out.ctypes.data)]
    build(ASYNC_GROUPS, "groups").launch((1, 1, 1), (128, 1, 1), 32768, holders)
    product = a.astype(np.float32) @ b.astype(np.float32)
    first = np.array([product[isa.wgmma_d(t, 0, 8)] for t in range(128)], np.float32)
    np.testing.assert_array_equal(out[:, 0], 5.0)  # read before any wait: the old register
    np.testing.assert_allclose(out[:, 1], first, rtol=1e-5, atol=1e-5)  # wait<1>: group 1 done (scale_d 0)
    np.testing.assert_array_equal(out[:, 2], 7.0)  # ... group 2 still pending
    np.testing.assert_allclose(out[:, 3], first, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[:, 4], first, rtol=1e-5, atol=1e-5)


TMA = r"""
// Thread 0 loads one box with TMA onto an mbarrier; everyone waits (or, with skip_wait,
// does not) and copies the shared bytes out.
extern "C" __global__ void tma_box(const __grid_constant__ tile_tensor_map map, unsigned char* out, int bytes,
                                   int c0, int c1, int skip_wait) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ alignas(8) uint64_t bar[1];
  int t = threadIdx.x;
  if (t == 0) {
    tile_mbarrier_init(&bar[0], 1);
    tile_fence_barrier_init();
  }
  __syncthreads();
  if (t == 0) {
    tile_mbarrier_arrive_expect_tx(&bar[0], (unsigned)bytes);
    tile_tma_load_2d(smem, &map, &bar[0], c0, c1);
  }
  if (!skip_wait) tile_mbarrier_wait(&bar[0], 0);
  for (int i = t; i < bytes; i += blockDim.x) out[i] = smem[i];
}
"""


def _tma_case(swizzle_bytes: int, coords: tuple[int, int], skip_wait: bool = False):
    rows, cols = 40, 96
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols).astype(np.float16) + np.float16(1)
    box_cols = swizzle_bytes // 2 if swizzle_bytes else 64
    box = (box_cols, 16)
    code = {0: 0, 32: 1, 64: 2, 128: 3}[swizzle_bytes]
    raw = encode_tensor_map(6, 2, src.ctypes.data, (cols, rows), (cols * 2,), box, (1, 1), swizzle=code)
    tmap = TensorMapArgument(raw)
    nbytes = box[0] * box[1] * 2
    out = np.full(nbytes, 0xAB, np.uint8)
    holders = [tmap.value, ctypes.c_void_p(out.ctypes.data), ctypes.c_int32(nbytes)]
    holders += [ctypes.c_int32(coords[0]), ctypes.c_int32(coords[1]), ctypes.c_int32(int(skip_wait))]
    build(TMA, "tma_box").launch((1, 1, 1), (64, 1, 1), 65536, holders)
    placed, tx = isa.tma_load_tile(
        lambda g: src[g[1], g[0]], (cols, rows), coords, box, 2, swizzle_bytes, oob_value=np.float16(0)
    )
    want = np.zeros(nbytes // 2, np.float16)
    for addr, value in placed.items():
        want[addr // 2] = value
    assert tx == nbytes
    return out.view(np.float16), want


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("coords", [(16, 8), (64, 32), (-8, -4)])
def test_tma_box_lands_swizzled_with_zero_fill(swizzle, coords):
    got, want = _tma_case(swizzle, coords)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_tma_read_before_the_mbarrier_wait_sees_no_data():
    got, want = _tma_case(128, (0, 0), skip_wait=True)
    assert not np.any(got.view(np.uint16) == want.view(np.uint16))  # poisoned shared memory instead


def test_tensor_map_rules_are_the_drivers():
    with pytest.raises(SimtLaunchError, match="swizzle span"):
        encode_tensor_map(6, 2, 1024, (128, 128), (256,), (128, 8), (1, 1), swizzle=3)
    with pytest.raises(SimtLaunchError, match="16-byte aligned"):
        encode_tensor_map(6, 2, 1026, (128, 128), (256,), (64, 8), (1, 1))
    with pytest.raises(SimtLaunchError, match="multiples of 16"):
        encode_tensor_map(6, 2, 1024, (100, 100), (200,), (64, 8), (1, 1))


RING = r"""
// Warp-specialized ring: warp 1 produces `rounds` values through 2 shared slots guarded
// by full/empty mbarriers (parity flips per reuse); warp 0 consumes them. drop_arrive
// leaves out the consumers' release, which must be reported as a deadlock.
extern "C" __global__ void ring(int* out, int rounds, int drop_arrive) {
  __shared__ alignas(8) uint64_t full[2];
  __shared__ alignas(8) uint64_t empty[2];
  __shared__ int slot[2][32];
  int t = threadIdx.x;
  if (t == 0) {
    for (int s = 0; s < 2; ++s) { tile_mbarrier_init(&full[s], 32); tile_mbarrier_init(&empty[s], 32); }
  }
  __syncthreads();
  int lane = t & 31;
  if (t >= 32) {
    for (int r = 0; r < rounds; ++r) {
      int s = r % 2;
      tile_mbarrier_wait(&empty[s], ((r / 2) & 1) ^ 1);
      slot[s][lane] = r * 100 + lane;
      tile_mbarrier_arrive(&full[s]);
    }
  } else {
    int sum = 0;
    for (int r = 0; r < rounds; ++r) {
      int s = r % 2;
      tile_mbarrier_wait(&full[s], (r / 2) & 1);
      sum += slot[s][lane];
      if (!drop_arrive) tile_mbarrier_arrive(&empty[s]);
    }
    out[lane] = sum;
  }
}
"""


def test_mbarrier_ring_phases_alternate_parity():
    rounds = 9
    out = np.zeros(32, np.int32)
    holders = [ctypes.c_void_p(out.ctypes.data), ctypes.c_int32(rounds), ctypes.c_int32(0)]
    for seed in (0, 3):
        out[:] = 0
        build(RING, "ring").launch((2, 1, 1), (64, 1, 1), 0, holders, seed=seed)
        lanes = np.arange(32)
        np.testing.assert_array_equal(out, sum(r * 100 + lanes for r in range(rounds)))


def test_an_mbarrier_no_one_completes_is_a_deadlock():
    out = np.zeros(32, np.int32)
    holders = [ctypes.c_void_p(out.ctypes.data), ctypes.c_int32(5), ctypes.c_int32(1)]
    with pytest.raises(SimtDeadlockError, match=r"mbarrier at .* is in phase 0 with 32 of 32 arrivals"):
        build(RING, "ring").launch((1, 1, 1), (64, 1, 1), 0, holders)


NO_FENCE = r"""
// A generic store to a wgmma operand with no fence.proxy.async before the barrier.
extern "C" __global__ void no_fence(float* out, int fence) {
  extern __shared__ __align__(1024) unsigned char smem[];
  int t = threadIdx.x;
  for (int i = t; i < 32768; i += blockDim.x) smem[i] = 0;
  if (fence) tile_fence_proxy_async();
  __syncthreads();
  float d[4] = {0, 0, 0, 0};
  tile_wgmma_fence();
  tile_wgmma_m64n8k16_ss_f16_f32<0, 0>(d, tile_wgmma_desc(smem, 128, 256, 0),
                                       tile_wgmma_desc(smem + 16384, 128, 256, 0), 0);
  tile_wgmma_commit();
  tile_wgmma_wait<0>();
  out[t] = d[0];
}
"""


def test_wgmma_operands_need_a_proxy_fence_after_generic_stores():
    out = np.ones(128, np.float32)
    build(NO_FENCE, "no_fence").launch(
        (1, 1, 1), (128, 1, 1), 32768, [ctypes.c_void_p(out.ctypes.data), ctypes.c_int32(1)]
    )
    np.testing.assert_array_equal(out, 0.0)
    with pytest.raises(SimtMisuseError, match=r"fence\.proxy\.async"):
        build(NO_FENCE, "no_fence").launch(
            (1, 1, 1), (128, 1, 1), 32768, [ctypes.c_void_p(out.ctypes.data), ctypes.c_int32(0)]
        )
