"""Warp collectives of the SIMT emulator against the PTX reference model (isa_tables).

Shuffles and votes follow the shfl.sync / vote.sync pseudocode; ldmatrix/stmatrix the
lane <-> (matrix, row, column) map; mma.sync the per-lane fragment layouts. For mma the
test scatters A, B and C into per-lane fragments with the reference layout functions
and gathers D back the same way, so a wrong layout in the emulator gives a wrong product.
"""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_simt_support import launch, needs_cxx

from tile.backends.cpu.simt import SimtDivergenceError, SimtMisuseError
from tile.testsupport import isa_tables as isa

pytestmark = needs_cxx

SHUFFLE = r"""
extern "C" __global__ void shfl_probe(const int* values, const int* b, int* out, int mode, int width) {
  int lane = threadIdx.x, v = values[lane], r = 0;
  switch (mode) {
    case 0: r = __shfl_sync(0xffffffffu, v, b[lane], width); break;
    case 1: r = __shfl_up_sync(0xffffffffu, v, (unsigned)b[lane], width); break;
    case 2: r = __shfl_down_sync(0xffffffffu, v, (unsigned)b[lane], width); break;
    default: r = __shfl_xor_sync(0xffffffffu, v, b[lane], width); break;
  }
  out[lane] = r;
}

extern "C" __global__ void wide_probe(const double* x, double* y, float* z) {
  int lane = threadIdx.x;
  y[lane] = tile::shfl_xor(x[lane], 5);                       // 64-bit value moves whole
  z[lane] = (float)tile::shfl_down(__float2half_rn((float)lane), 3u);  // 16-bit value
}

extern "C" __global__ void vote_probe(const int* preds, unsigned* out) {
  int lane = threadIdx.x, p = preds[lane];
  out[4 * lane + 0] = tile::ballot(p);
  out[4 * lane + 1] = tile::vote_any(p);
  out[4 * lane + 2] = tile::vote_all(p);
  out[4 * lane + 3] = __uni_sync(0xffffffffu, p);
}

extern "C" __global__ void diverged(int* out) {
  int lane = threadIdx.x;
  if (lane < 16) out[lane] = tile::shfl_xor(lane, 1);
  else out[lane] = (int)tile::ballot(lane & 1);
}
"""

MODES = {"idx": 0, "up": 1, "down": 2, "bfly": 3}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("width", [32, 16, 8, 4])
def test_shuffles_follow_the_ptx_pseudocode(mode, width):
    rng = np.random.default_rng(MODES[mode] * 100 + width)
    values = rng.integers(-(2**31), 2**31 - 1, 32).astype(np.int32)
    b = rng.integers(0, 32, 32).astype(np.int32)
    if mode != "idx":
        b[:] = b[0] % width  # delta / lane mask: one value per warp, as compilers emit
    out = np.zeros(32, np.int32)
    launch(SHUFFLE, "shfl_probe", (1, 1, 1), (32, 1, 1), values, b, out, MODES[mode], width)
    want, _ = isa.shfl_sync(list(values), mode, [int(x) for x in b], isa.shfl_c_operand(mode, width))
    np.testing.assert_array_equal(out, np.array(want, np.int32))


def test_shuffles_move_64_and_16_bit_values():
    x = np.random.default_rng(1).standard_normal(32)
    y = np.zeros(32)
    z = np.zeros(32, np.float32)
    launch(SHUFFLE, "wide_probe", (1, 1, 1), (32, 1, 1), x, y, z)
    np.testing.assert_array_equal(y, x[np.arange(32) ^ 5])
    lanes = np.arange(32)
    np.testing.assert_array_equal(z, np.where(lanes + 3 < 32, lanes + 3, lanes).astype(np.float32))


def test_votes():
    for seed, density in ((0, 0.5), (1, 1.0), (2, 0.0)):
        preds = (np.random.default_rng(seed).random(32) < density).astype(np.int32)
        out = np.zeros((32, 4), np.uint32)
        launch(SHUFFLE, "vote_probe", (1, 1, 1), (32, 1, 1), preds, out)
        p = [bool(x) for x in preds]
        assert (out[:, 0] == isa.vote_ballot(p)).all()
        assert (out[:, 1] == isa.vote_any(p)).all() and (out[:, 2] == isa.vote_all(p)).all()
        assert (out[:, 3] == isa.vote_uni(p)).all()


def test_lanes_at_different_collectives_are_a_divergence_fault():
    with pytest.raises(SimtDivergenceError, match="diverged"):
        launch(SHUFFLE, "diverged", (1, 1, 1), (32, 1, 1), np.zeros(32, np.int32))


MATRIX = r"""
// OP's variant for (num, trans): OP_x1, OP_x1_trans, OP_x2, ..., OP_x4_trans, on operands A, B.
#define MATRIX_VARIANT(OP, num, trans, A, B) \
  switch (num * 2 + trans) {                 \
    case 2: OP##_x1(A, B); break;            \
    case 3: OP##_x1_trans(A, B); break;      \
    case 4: OP##_x2(A, B); break;            \
    case 5: OP##_x2_trans(A, B); break;      \
    case 8: OP##_x4(A, B); break;            \
    default: OP##_x4_trans(A, B); break;     \
  }

// Rows of shared memory hold distinct 16-bit values; lane L points at row offsets[L].
extern "C" __global__ void ldmatrix_probe(const unsigned short* data, const int* offsets, unsigned* out,
                                          int num, int trans) {
  extern __shared__ __align__(16) unsigned char smem[];
  int lane = threadIdx.x;
  for (int i = lane; i < 1024; i += 32) ((unsigned short*)smem)[i] = data[i];
  __syncthreads();
  unsigned regs[4] = {0, 0, 0, 0};
  const void* row = smem + offsets[lane];
  MATRIX_VARIANT(tile_ldmatrix, num, trans, regs, row)
  for (int q = 0; q < 4; ++q) out[4 * lane + q] = regs[q];
}

extern "C" __global__ void stmatrix_probe(const unsigned* regs_in, const int* offsets, unsigned short* out,
                                          int num, int trans) {
  extern __shared__ __align__(16) unsigned char smem[];
  int lane = threadIdx.x;
  for (int i = lane; i < 1024; i += 32) ((unsigned short*)smem)[i] = 0;
  __syncthreads();
  unsigned regs[4];
  for (int q = 0; q < 4; ++q) regs[q] = regs_in[4 * lane + q];
  void* row = smem + offsets[lane];
  MATRIX_VARIANT(tile_stmatrix, num, trans, row, regs)
  __syncthreads();
  for (int i = lane; i < 1024; i += 32) out[i] = ((unsigned short*)smem)[i];
}
"""


def _row_offsets(seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).permutation(128)[:32]  # 128 16-byte rows in 2 KiB
    return (rows * 16).astype(np.int32)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_matches_the_reference(num, trans):
    data = np.random.default_rng(num).permutation(1024).astype(np.uint16)
    offsets = _row_offsets(num + 10 * trans)
    out = np.zeros((32, 4), np.uint32)
    launch(MATRIX, "ldmatrix_probe", (1, 1, 1), (32, 1, 1), data, offsets, out, num, int(trans), shared=2048)
    want = isa.ldmatrix_simulate(lambda addr: int(data[addr // 2]), [int(o) for o in offsets], num, trans)
    for lane in range(32):
        for q in range(num):
            lo, hi = want[lane][q]
            assert out[lane, q] == lo | (hi << 16), (lane, q)


@pytest.mark.parametrize("num", [1, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_matches_the_reference(num, trans):
    rng = np.random.default_rng(num + 5)
    regs = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    offsets = _row_offsets(num + 20 * trans)
    out = np.zeros(1024, np.uint16)
    launch(MATRIX, "stmatrix_probe", (1, 1, 1), (32, 1, 1), regs, offsets, out, num, int(trans), shared=2048)
    want = np.zeros(1024, np.uint16)

    def write16(addr: int, value: int) -> None:
        want[addr // 2] = value

    halves = [[(int(r) & 0xFFFF, int(r) >> 16) for r in regs[lane]] for lane in range(32)]
    isa.stmatrix_simulate(write16, [int(o) for o in offsets], halves, num, trans)
    np.testing.assert_array_equal(out, want)


def test_misaligned_ldmatrix_row_is_a_fault():
    data = np.zeros(1024, np.uint16)
    offsets = _row_offsets(3)
    offsets[5] += 4
    with pytest.raises(SimtMisuseError, match=r"lane 5.*16-byte aligned"):
        launch(MATRIX, "ldmatrix_probe", (1, 1, 1), (32, 1, 1), data, offsets, np.zeros((32, 4), np.uint32),
               4, 0, shared=2048)


MMA = r"""
// Lane L's fragments are the 16 + 8 + 16 bytes at L in a, b, c; D goes back to d.
extern "C" __global__ void mma_probe(const unsigned char* a, const unsigned char* b, const unsigned char* c,
                                     unsigned char* d, int kind) {
  int lane = threadIdx.x;
  alignas(16) unsigned char ra[16], rb[8], rd[16];
  memcpy(ra, a + 16 * lane, 16);
  memcpy(rb, b + 8 * lane, 8);
  memcpy(rd, c + 16 * lane, 16);
  switch (kind) {
    case 1: tile_mma_m16n8k16_f16_f32((float*)rd, ra, rb); break;
    case 2: tile_mma_m16n8k16_bf16_f32((float*)rd, ra, rb); break;
    case 3: tile_mma_m16n8k16_f16_f16(rd, ra, rb); break;
    case 4: tile_mma_m16n8k32_s8_s32((int*)rd, ra, rb); break;
    case 5: tile_mma_m16n8k32_u8_s32((int*)rd, ra, rb); break;
    case 6: tile_mma_m16n8k32_e4m3_f32((float*)rd, ra, rb); break;
    case 7: tile_mma_m16n8k32_e5m2_f32((float*)rd, ra, rb); break;
    default: tile_mma_m16n8k8_tf32_f32((float*)rd, ra, rb); break;
  }
  memcpy(d + 16 * lane, rd, 16);
}
"""


def _bf16(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _fp8(x: np.ndarray, name: str) -> np.ndarray:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return x.astype(getattr(ml_dtypes, name)).view(np.uint8)


# kind: (code, A fragment, B fragment, k, input encoder, accumulator dtype)
KINDS = {
    "f16_f32": (1, "m16n8k16_f16_A", "m16n8k16_f16_B", 16, lambda x: x.astype(np.float16), np.float32),
    "bf16_f32": (2, "m16n8k16_f16_A", "m16n8k16_f16_B", 16, _bf16, np.float32),
    "f16_f16": (3, "m16n8k16_f16_A", "m16n8k16_f16_B", 16, lambda x: x.astype(np.float16), np.float16),
    "s8_s32": (4, "m16n8k32_s8_A", "m16n8k32_s8_B", 32, lambda x: x.astype(np.int8), np.int32),
    "u8_s32": (5, "m16n8k32_s8_A", "m16n8k32_s8_B", 32, lambda x: (x + 8).astype(np.uint8), np.int32),
    "e4m3_f32": (6, "m16n8k32_s8_A", "m16n8k32_s8_B", 32, lambda x: _fp8(x, "float8_e4m3fn"), np.float32),
    "e5m2_f32": (7, "m16n8k32_s8_A", "m16n8k32_s8_B", 32, lambda x: _fp8(x, "float8_e5m2"), np.float32),
    "tf32_f32": (8, "m16n8k8_tf32_A", "m16n8k8_tf32_B", 8, lambda x: x.astype(np.float32), np.float32),
}


def _scatter(fragment: str, matrix: np.ndarray, elems: int) -> np.ndarray:
    fn = isa.MMA_FRAGMENTS[fragment][0]
    return np.array([[matrix[fn(lane, i)] for i in range(elems)] for lane in range(32)])


@pytest.mark.parametrize("kind", list(KINDS))
def test_mma_fragments_and_products(kind):
    code, a_name, b_name, k, encode, acc = KINDS[kind]
    rng = np.random.default_rng(code)
    a = rng.integers(-4, 5, (16, k)).astype(np.float32)  # small integers: every product and sum is exact
    b = rng.integers(-4, 5, (k, 8)).astype(np.float32)
    c = rng.integers(-50, 50, (16, 8)).astype(np.float32)
    a_frag = _scatter(a_name, encode(a), isa.MMA_FRAGMENTS[a_name][2])
    b_frag = _scatter(b_name, encode(b), isa.MMA_FRAGMENTS[b_name][2])
    c_frag = _scatter("m16n8_f32_C", c.astype(acc), 4)
    pack = np.zeros((32, 16), np.uint8)
    pack_b = np.zeros((32, 8), np.uint8)
    pack_c = np.zeros((32, 16), np.uint8)
    for packed, frag in ((pack, a_frag), (pack_b, b_frag), (pack_c, c_frag)):
        raw = np.ascontiguousarray(frag).view(np.uint8).reshape(32, -1)
        packed[:, : raw.shape[1]] = raw
    out = np.zeros((32, 16), np.uint8)
    launch(MMA, "mma_probe", (1, 1, 1), (32, 1, 1), pack, pack_b, pack_c, out, code)
    d_frag = out[:, : np.dtype(acc).itemsize * 4].copy().view(acc).reshape(32, 4)
    d = np.zeros((16, 8), np.float64)
    for lane in range(32):
        for i in range(4):
            d[isa.mma_m16n8_c(lane, i)] = d_frag[lane, i]
    a_value = a + 8 if kind == "u8_s32" else a
    b_value = b + 8 if kind == "u8_s32" else b
    want = np.array(isa.mma_reference(a_value.tolist(), b_value.tolist(), c.tolist()))
    np.testing.assert_array_equal(d, want)


def test_tf32_mma_reads_only_the_top_19_bits():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    a_frag = _scatter("m16n8k8_tf32_A", a, 4)
    b_frag = _scatter("m16n8k8_tf32_B", b, 2)
    pack = np.ascontiguousarray(a_frag).view(np.uint8).reshape(32, 16)
    pack_b = np.ascontiguousarray(b_frag).view(np.uint8).reshape(32, 8)
    out = np.zeros((32, 16), np.uint8)
    launch(MMA, "mma_probe", (1, 1, 1), (32, 1, 1), pack, pack_b, np.zeros((32, 16), np.uint8), out, 8)
    d = np.zeros((16, 8), np.float32)
    d_frag = out.view(np.float32).reshape(32, 4)
    for lane in range(32):
        for i in range(4):
            d[isa.mma_m16n8_c(lane, i)] = d_frag[lane, i]

    def truncate(x: np.ndarray) -> np.ndarray:
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)

    np.testing.assert_allclose(d, truncate(a) @ truncate(b), rtol=1e-5, atol=1e-5)
    assert not np.allclose(d, a.astype(np.float64) @ b, rtol=1e-7, atol=1e-7)  # truncation is visible
