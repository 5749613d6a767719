// tile_hip.h for the SIMT emulator: the entry points of the ROCm backend's device header
// (tile/backends/rocm/include/tile_hip.h), implemented on the host for wave64 launches.
// A HIP kernel's generated source includes "tile_hip.h"; compiling it with this folder on
// the include path runs it on the CPU, unchanged. The HIP kernel body is CUDA-dialect C++
// (threadIdx, __shared__, __syncthreads), which tile_simt_dialect.h (tile-backends-cpu) already provides.
//
// Wave collectives name all 64 lanes: shuffles go through TILE_SIMT_SHFL with a 64-bit
// member mask, MFMAs through tile_simt_warp_call with tile_hip_mfma_compute, which this
// device's native source (../native/simt_mfma.cpp) defines.
#pragma once

#include <stdint.h>
#include <string.h>

#include "tile_simt_common.h"  // the vendor-neutral tile:: entry points (tile-backends-cpu)

#define TILE_WAVE_SIZE 64
#define TILE_SIMT_WAVE_MASK (~0ull)

// ---------------------------------------------------------------- names from TVM's CUDA prelude
#define uint unsigned int
#define uchar unsigned char
#define ushort unsigned short

inline unsigned __pack_nv_bfloat162(const tile_bf16 x, const tile_bf16 y) {
  return ((unsigned)__bfloat16_as_ushort(y) << 16) | (unsigned)__bfloat16_as_ushort(x);
}

#include "tile_hip/vectors.h"  // shared with the GPU header: its folder follows this one on the path
#include "tile_hip/max_min.h"
#include "tile_hip/copies.h"  // T.ptx_cp_async: synchronous copies

inline unsigned __pack_half2(const half x, const half y) {
  return ((unsigned)__half_as_ushort(y) << 16) | (unsigned)__half_as_ushort(x);
}

// CUDA's __syncwarp (T.sync_warp), which the GPU header defines for a wavefront: its 32-bit
// mask cannot name a wave64's upper lanes, so the whole wave takes part, as on the device.
inline void tile_hip_wave_sync(int line) {
  tile_simt_args args{};
  tile_simt_dialect::collective(TILE_SIMT_SYNCWARP, TILE_SIMT_WAVE_MASK, &args, line);
}
#define __syncwarp(...) tile_hip_wave_sync(__builtin_LINE())
namespace tile {

// ---------------------------------------------------------------- max / min (TVM's T.max, T.min)
// The rest are in tile_hip/max_min.h (included above), shared with the GPU header.
TILE_DEVICE half max(half a, half b) { return (float)b < (float)a ? a : b; }  // a NaN `a` loses: max_min.h
TILE_DEVICE half min(half a, half b) { return (float)a < (float)b ? a : b; }

// ---------------------------------------------------------------- lane and wave ids (wave64)
TILE_DEVICE int lane_id() { return (int)(threadIdx.x & 63u); }
TILE_DEVICE int warp_id() { return (int)(threadIdx.x >> 6); }

// ---------------------------------------------------------------- wave shuffles
// HIP's __shfl(value, src_lane, width) (mode 0) and __shfl_xor(value, lane_mask, width)
// (mode 3): every lane of the wave takes part, in segments of width lanes.
template <typename T>
TILE_DEVICE T wave_shuffle(int mode, T value, int b, int width, int line) {
  const int c = ((TILE_WAVE_SIZE - width) << 8) | (TILE_WAVE_SIZE - 1);  // segment mask, last lane
  return tile_simt_dialect::shuffle_bits(mode, TILE_SIMT_WAVE_MASK, value, b, c, line);
}
template <typename T>
TILE_DEVICE T shfl_xor(T value, int lane_mask, int width = TILE_WAVE_SIZE, int line = __builtin_LINE()) {
  return wave_shuffle(3, value, lane_mask, width, line);
}
template <typename T>
TILE_DEVICE T shfl_idx(T value, int src_lane, int width = TILE_WAVE_SIZE, int line = __builtin_LINE()) {
  return wave_shuffle(0, value, src_lane, width, line);
}

}  // namespace tile

// ---------------------------------------------------------------- MFMA (tile_hip/mfma.h)
// Each lane passes pointers to its registers in AMD's element order; the 64th lane to arrive
// computes D = A * B + D for the wave (native/simt_mfma.cpp: fp32 accumulation for f16/bf16,
// int32 for int8). Unlike the device, the emulator offers every int8 form on every arch.
enum tile_simt_mfma_kind {
  TILE_SIMT_MFMA_F32_16X16X16_F16 = 1,
  TILE_SIMT_MFMA_F32_16X16X16_BF16 = 2,
  TILE_SIMT_MFMA_F32_32X32X8_F16 = 3,
  TILE_SIMT_MFMA_F32_32X32X8_BF16 = 4,
  TILE_SIMT_MFMA_I32_16X16X16_I8 = 5,
  TILE_SIMT_MFMA_I32_32X32X8_I8 = 6,
  TILE_SIMT_MFMA_I32_16X16X32_I8 = 7,
  TILE_SIMT_MFMA_I32_32X32X16_I8 = 8,
};

extern "C" int tile_hip_mfma_compute(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                     char* error, unsigned long error_size);

static inline void tile_simt_mfma(int kind, void* d, const void* a, const void* b, int line) {
  tile_simt_matrix_call(tile_hip_mfma_compute, "an MFMA", TILE_SIMT_WAVE_MASK, kind, d, a, b, line);
}
static inline void tile_mfma_f32_16x16x16_f16(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_F32_16X16X16_F16, d, a, b, line);
}
static inline void tile_mfma_f32_16x16x16_bf16(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_F32_16X16X16_BF16, d, a, b, line);
}
static inline void tile_mfma_f32_32x32x8_f16(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_F32_32X32X8_F16, d, a, b, line);
}
static inline void tile_mfma_f32_32x32x8_bf16(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_F32_32X32X8_BF16, d, a, b, line);
}
static inline void tile_mfma_i32_16x16x16_i8(int* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_I32_16X16X16_I8, d, a, b, line);
}
static inline void tile_mfma_i32_32x32x8_i8(int* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_I32_32X32X8_I8, d, a, b, line);
}
static inline void tile_mfma_i32_16x16x32_i8(int* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_I32_16X16X32_I8, d, a, b, line);
}
static inline void tile_mfma_i32_32x32x16_i8(int* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mfma(TILE_SIMT_MFMA_I32_32X32X16_I8, d, a, b, line);
}

#include "tile_hip/async.h"
#include "tile_hip/waitcnt.h"
