// AMD CDNA matrix-core instructions (v_mfma_*) as wave64 collectives of the SIMT emulator.
//
// A native source of the ROCm backend's emulated device (tile.backends.rocm.emu): built into
// the device's library, which the emulator loads before HIP kernels; tile_hip.h's
// tile_simt_mfma hands tile_hip_mfma_compute to tile_simt_warp_call. Each of the 64 lanes
// passes: p0 = its accumulator registers (fp32 or int32, read and written), p1 =
// its A elements, p2 = its B elements, i0 = the kind below. The last lane to arrive computes
// D = A * B + C for the whole wave: fp32 accumulation for f16/bf16, int32 (wrapping) for int8.
//
// Register layouts, written from the AMD Matrix Instruction Calculator's tables
// ("Matrix element to register mapping with no modifiers"), independently of tile-layout:
//   16x16x16: A[i][k] in lane i + 16*(k/4), element k%4;   B[k][j] in lane j + 16*(k/4), element k%4;
//             D[i][j] in lane j + 16*(i/4), register i%4.
//   32x32x8:  A[i][k] in lane i + 32*(k/4), element k%4;   B[k][j] in lane j + 32*(k/4), element k%4;
//             D[i][j] in lane j + 32*((i/4)%2), register 4*(i/8) + i%4.
// f16/bf16 A/B elements are 16-bit, 4 per lane. int8: v_mfma_i32_16x16x16i8 / _32x32x8i8
// (CDNA2) take 4 bytes per lane in the places above; v_mfma_i32_16x16x32_i8 / _32x32x16_i8
// (CDNA3) take 8: A[i][k] in lane i + T*(k/8), byte k%8 (B alike), D as above. Source for the
// int8 forms: IREE's AMD intrinsic table (iree-org/iree, compiler/src/iree/compiler/Codegen/
// Dialect/GPU/IR/IREEGPUAttrs.cpp, getSingleSubgroupLayout: MFMA_I32_16x16x32_I8 = thread
// {16, 4}, strides {1, 16}, element {1, 8}; MFMA_I32_32x32x16_I8 = {32, 2}, {1, 32}, {1, 8}).
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tile_simt.h"

namespace {

enum MfmaKind {
  kF32_16x16x16_F16 = 1,
  kF32_16x16x16_BF16 = 2,
  kF32_32x32x8_F16 = 3,
  kF32_32x32x8_BF16 = 4,
  kI32_16x16x16_I8 = 5,
  kI32_32x32x8_I8 = 6,
  kI32_16x16x32_I8 = 7,
  kI32_32x32x16_I8 = 8,
};

enum Operand { kF16, kBF16, kI8 };

struct MfmaShape {
  int m, n, k;      // D is m x n, A m x k, B k x n
  int regs;         // accumulator registers per lane
  int per_lane;     // A (and B) elements per lane
  Operand operand;  // f16/bf16 accumulate in fp32, int8 in int32
};

bool shape_of(int kind, MfmaShape* shape) {
  switch (kind) {
    case kF32_16x16x16_F16: *shape = {16, 16, 16, 4, 4, kF16}; return true;
    case kF32_16x16x16_BF16: *shape = {16, 16, 16, 4, 4, kBF16}; return true;
    case kF32_32x32x8_F16: *shape = {32, 32, 8, 16, 4, kF16}; return true;
    case kF32_32x32x8_BF16: *shape = {32, 32, 8, 16, 4, kBF16}; return true;
    case kI32_16x16x16_I8: *shape = {16, 16, 16, 4, 4, kI8}; return true;
    case kI32_32x32x8_I8: *shape = {32, 32, 8, 16, 4, kI8}; return true;
    case kI32_16x16x32_I8: *shape = {16, 16, 32, 4, 8, kI8}; return true;
    case kI32_32x32x16_I8: *shape = {32, 32, 16, 16, 8, kI8}; return true;
    default: return false;
  }
}

// Operand element v of a lane, exactly (f16/bf16 as float; int8 as its integer value).
double element(const void* base, int v, Operand operand) {
  if (operand == kI8) {
    int8_t byte;
    memcpy(&byte, (const unsigned char*)base + v, 1);
    return byte;
  }
  uint16_t bits;
  memcpy(&bits, (const unsigned char*)base + 2 * v, 2);
  return operand == kBF16 ? tile_simt_bfloat16_to_float(bits) : tile_simt_half_to_float(bits);
}

// Where an operand or accumulator element lives: lane and element/register index.
void a_slot(const MfmaShape& s, int i, int k, int* lane, int* v) {
  *lane = i + s.m * (k / s.per_lane);
  *v = k % s.per_lane;
}
void b_slot(const MfmaShape& s, int k, int j, int* lane, int* v) {
  *lane = j + s.n * (k / s.per_lane);
  *v = k % s.per_lane;
}
void d_slot(const MfmaShape& s, int i, int j, int* lane, int* g) {
  if (s.m == 16) {
    *lane = j + 16 * (i / 4);
    *g = i % 4;
  } else {
    *lane = j + 32 * ((i / 4) % 2);
    *g = 4 * (i / 8) + i % 4;
  }
}

}  // namespace

// The wave collective's compute function (tile_simt_compute_fn).
extern "C" int tile_hip_mfma_compute(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                     char* error, unsigned long error_size) {
  const int kind = lanes[0].i0;
  MfmaShape s;
  if (!shape_of(kind, &s)) {
    snprintf(error, error_size, "MFMA kind %d is not implemented by this emulator", kind);
    return TILE_SIMT_MISUSE;
  }
  if (warp_size != 64 || mask != ~0ull) {
    snprintf(error, error_size, "MFMA needs all 64 lanes of a wave64 (warp size %u, %d lanes arrived)",
             warp_size, __builtin_popcountll(mask));
    return TILE_SIMT_MISUSE;
  }
  for (int lane = 1; lane < 64; ++lane) {
    if (lanes[lane].i0 != kind) {
      snprintf(error, error_size, "MFMA: lane %d issued kind %d, lane 0 kind %d", lane, lanes[lane].i0, kind);
      return TILE_SIMT_MISUSE;
    }
  }
  double a[32][32], b[32][32];  // the largest shapes: M, N up to 32, K up to 32
  for (int i = 0; i < s.m; ++i)
    for (int k = 0; k < s.k; ++k) {
      int lane, v;
      a_slot(s, i, k, &lane, &v);
      a[i][k] = element(lanes[lane].p1, v, s.operand);
    }
  for (int k = 0; k < s.k; ++k)
    for (int j = 0; j < s.n; ++j) {
      int lane, v;
      b_slot(s, k, j, &lane, &v);
      b[k][j] = element(lanes[lane].p2, v, s.operand);
    }
  // Read every accumulator before writing any, so the result does not depend on lane order.
  // Each is 4 bytes: an fp32 or an int32 register.
  uint32_t d[32][32];
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      int lane, g;
      d_slot(s, i, j, &lane, &g);
      memcpy(&d[i][j], (const uint32_t*)lanes[lane].p0 + g, 4);
    }
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      uint32_t out;
      if (s.operand == kI8) {
        // int32 accumulation wraps like the hardware's: sum in unsigned 32-bit arithmetic.
        uint32_t acc = d[i][j];
        for (int k = 0; k < s.k; ++k) acc += (uint32_t)(int32_t)(a[i][k] * b[k][j]);
        out = acc;
      } else {
        float acc;
        memcpy(&acc, &d[i][j], 4);
        // Products of 16-bit values are exact in fp32; the sum runs in fp32 as before.
        for (int k = 0; k < s.k; ++k) acc += (float)(a[i][k] * b[k][j]);
        memcpy(&out, &acc, 4);
      }
      int lane, g;
      d_slot(s, i, j, &lane, &g);
      memcpy((uint32_t*)lanes[lane].p0 + g, &out, 4);
    }
  return TILE_SIMT_OK;
}
