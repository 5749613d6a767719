// tile_cuda/mma.h for the SIMT emulator: mma.sync as a warp collective. Each lane passes
// pointers to its fragment registers (PTX element order, as in the CUDA header); the
// 32nd lane to arrive computes D = A * B + D for the whole warp with fp32 (or s32)
// accumulation, reading every lane's fragments through the PTX fragment layouts
// (tile_cuda_mma_compute, in this device's native source native/simt_mma.cpp).
#pragma once

#include "mma_kinds.h"

extern "C" int tile_cuda_mma_compute(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                     char* error, unsigned long error_size);

static inline void tile_simt_mma(int kind, void* d, const void* a, const void* b, int line) {
  tile_simt_matrix_call(tile_cuda_mma_compute, "mma.sync", 0xffffffffull, kind, d, a, b, line);
}

static inline void tile_mma_m16n8k16_f16_f32(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K16_F16_F32, d, a, b, line);
}
static inline void tile_mma_m16n8k16_bf16_f32(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K16_BF16_F32, d, a, b, line);
}
static inline void tile_mma_m16n8k16_f16_f16(void* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K16_F16_F16, d, a, b, line);
}
static inline void tile_mma_m16n8k32_s8_s32(int* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K32_S8_S32, d, a, b, line);
}
static inline void tile_mma_m16n8k32_u8_s32(int* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K32_U8_S32, d, a, b, line);
}
static inline void tile_mma_m16n8k32_e4m3_f32(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K32_E4M3_F32, d, a, b, line);
}
static inline void tile_mma_m16n8k32_e5m2_f32(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K32_E5M2_F32, d, a, b, line);
}
static inline void tile_mma_m16n8k8_tf32_f32(float* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K8_TF32_F32, d, a, b, line);
}
static inline void tile_mma_m16n8k4_f64(double* d, const void* a, const void* b, int line = __builtin_LINE()) {
  tile_simt_mma(TILE_SIMT_MMA_M16N8K4_F64, d, a, b, line);
}

// float -> tf32 (round to nearest, ties away from zero), kept in a float's bits.
static inline float tile_to_tf32(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits += 0x1000u;  // half of the dropped 13 bits
  bits &= 0xffffe000u;
  memcpy(&x, &bits, 4);
  return x;
}
