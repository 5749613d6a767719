// tile_hip/mfma.h: CDNA matrix-core instructions (v_mfma_*), one wave64 per call.
//
// Every lane passes pointers to its own registers, in the MFMA element order of the
// AMD Matrix Instruction Calculator (no CBSZ/ABID/BLGP modifiers):
//   16x16x16: a = 4 elements (A[l%16][4(l/16)+v]), b = 4 elements (B[4(l/16)+v][l%16]),
//             d = 4 floats (D[4(l/16)+g][l%16]).
//   32x32x8:  a = 4 elements (A[l%32][4(l/32)+v]), b = 4 elements (B[4(l/32)+v][l%32]),
//             d = 16 floats (D[8(g/4)+4(l/32)+g%4][l%32]).
// D = A * B + D with fp32 accumulation. gfx90a spells the instructions v_mfma_f32_16x16x16f16 and
// v_mfma_f32_16x16x16bf16_1k, gfx942 v_mfma_f32_16x16x16_f16 / _bf16; the builtins are the same.
#pragma once

typedef _Float16 tile_half4 __attribute__((ext_vector_type(4)));
typedef short tile_short4 __attribute__((ext_vector_type(4)));
typedef float tile_float4 __attribute__((ext_vector_type(4)));
typedef float tile_float16 __attribute__((ext_vector_type(16)));

TILE_DEVICE void tile_mfma_f32_16x16x16_f16(float* d, const void* a, const void* b) {
  tile_half4 av = *(const tile_half4*)a, bv = *(const tile_half4*)b;
  tile_float4 acc = *(tile_float4*)d;
  *(tile_float4*)d = __builtin_amdgcn_mfma_f32_16x16x16f16(av, bv, acc, 0, 0, 0);
}
TILE_DEVICE void tile_mfma_f32_16x16x16_bf16(float* d, const void* a, const void* b) {
  tile_short4 av = *(const tile_short4*)a, bv = *(const tile_short4*)b;
  tile_float4 acc = *(tile_float4*)d;
  *(tile_float4*)d = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, acc, 0, 0, 0);
}
TILE_DEVICE void tile_mfma_f32_32x32x8_f16(float* d, const void* a, const void* b) {
  tile_half4 av = *(const tile_half4*)a, bv = *(const tile_half4*)b;
  tile_float16 acc = *(tile_float16*)d;
  *(tile_float16*)d = __builtin_amdgcn_mfma_f32_32x32x8f16(av, bv, acc, 0, 0, 0);
}
TILE_DEVICE void tile_mfma_f32_32x32x8_bf16(float* d, const void* a, const void* b) {
  tile_short4 av = *(const tile_short4*)a, bv = *(const tile_short4*)b;
  tile_float16 acc = *(tile_float16*)d;
  *(tile_float16*)d = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(av, bv, acc, 0, 0, 0);
}
