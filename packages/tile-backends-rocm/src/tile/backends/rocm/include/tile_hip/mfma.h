// tile_hip/mfma.h: CDNA matrix-core instructions (v_mfma_*), one wave64 per call.
//
// Every lane passes pointers to its own registers, in the MFMA element order of the
// AMD Matrix Instruction Calculator (no CBSZ/ABID/BLGP modifiers):
//   16x16x16: a = 4 elements (A[l%16][4(l/16)+v]), b = 4 elements (B[4(l/16)+v][l%16]),
//             d = 4 floats (D[4(l/16)+g][l%16]).
//   32x32x8:  a = 4 elements (A[l%32][4(l/32)+v]), b = 4 elements (B[4(l/32)+v][l%32]),
//             d = 16 floats (D[8(g/4)+4(l/32)+g%4][l%32]).
// f16/bf16: D = A * B + D with fp32 accumulation. gfx90a spells the instructions v_mfma_f32_16x16x16f16 and
// v_mfma_f32_16x16x16bf16_1k, gfx942 v_mfma_f32_16x16x16_f16 / _bf16; the builtins are the same.
#pragma once

typedef _Float16 tile_half4 __attribute__((ext_vector_type(4)));
typedef short tile_short4 __attribute__((ext_vector_type(4)));
typedef float tile_float4 __attribute__((ext_vector_type(4)));
typedef float tile_float16 __attribute__((ext_vector_type(16)));

// One wrapper per instruction: the operands load as a 4-vector (OPERAND), the accumulator as
// ACC (4 floats for 16x16, 16 for 32x32).
#define TILE_MFMA_16BIT(NAME, BUILTIN, OPERAND, ACC)                                  \
  TILE_DEVICE void NAME(float* d, const void* a, const void* b) {                     \
    OPERAND av = *(const OPERAND*)a, bv = *(const OPERAND*)b;                         \
    ACC acc = *(ACC*)d;                                                               \
    *(ACC*)d = BUILTIN(av, bv, acc, 0, 0, 0);                                         \
  }
TILE_MFMA_16BIT(tile_mfma_f32_16x16x16_f16, __builtin_amdgcn_mfma_f32_16x16x16f16, tile_half4, tile_float4)
TILE_MFMA_16BIT(tile_mfma_f32_16x16x16_bf16, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k, tile_short4, tile_float4)
TILE_MFMA_16BIT(tile_mfma_f32_32x32x8_f16, __builtin_amdgcn_mfma_f32_32x32x8f16, tile_half4, tile_float16)
TILE_MFMA_16BIT(tile_mfma_f32_32x32x8_bf16, __builtin_amdgcn_mfma_f32_32x32x8bf16_1k, tile_short4, tile_float16)
#undef TILE_MFMA_16BIT

// int8 x int8 -> int32. Operands are bytes, lowest first: lane l of a T x T x K MFMA holds
// A[l%T][p(l/T)+v] and B[p(l/T)+v][l%T], v = 0..p-1, p = K*T/64 (4 on CDNA2, 8 on CDNA3);
// D is laid out as for the f32 forms (int32 registers). Source for the int8 operand layouts:
// IREE's AMD intrinsic table (iree-org/iree, compiler/src/iree/compiler/Codegen/Dialect/GPU/IR/
// IREEGPUAttrs.cpp, getSingleSubgroupLayout): MFMA_I32_16x16x16_I8 shares the f16 16x16x16
// layout; MFMA_I32_16x16x32_I8 is thread {16, 4}, strides {1, 16}, element {1, 8}. The operand bytes are copied into
// the builtin's int / long, so the register arrays need no more than byte alignment.
// CDNA3 replaced the CDNA2 int8 forms (16x16x16i8, 32x32x8i8) by K=32 / K=16 ones: each
// wrapper exists only where its instruction does.
typedef int tile_int4 __attribute__((ext_vector_type(4)));
typedef int tile_int16 __attribute__((ext_vector_type(16)));
// OPERAND: the int (4 bytes) or long (8 bytes) one lane's bytes are copied into.
#define TILE_MFMA_INT8(NAME, BUILTIN, OPERAND, ACC)                                   \
  TILE_DEVICE void NAME(int* d, const void* a, const void* b) {                       \
    OPERAND av, bv;                                                                   \
    __builtin_memcpy(&av, a, sizeof(OPERAND));                                        \
    __builtin_memcpy(&bv, b, sizeof(OPERAND));                                        \
    ACC acc = *(ACC*)d;                                                               \
    *(ACC*)d = BUILTIN(av, bv, acc, 0, 0, 0);                                         \
  }
#if defined(__gfx90a__)
TILE_MFMA_INT8(tile_mfma_i32_16x16x16_i8, __builtin_amdgcn_mfma_i32_16x16x16i8, int, tile_int4)
TILE_MFMA_INT8(tile_mfma_i32_32x32x8_i8, __builtin_amdgcn_mfma_i32_32x32x8i8, int, tile_int16)
#endif
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
// 8 bytes per lane in one 64-bit operand (clang 15 knows these builtins for gfx940; its
// target list stops before gfx942, which the compile tests report as a skip).
TILE_MFMA_INT8(tile_mfma_i32_16x16x32_i8, __builtin_amdgcn_mfma_i32_16x16x32_i8, long, tile_int4)
TILE_MFMA_INT8(tile_mfma_i32_32x32x16_i8, __builtin_amdgcn_mfma_i32_32x32x16_i8, long, tile_int16)
#endif
#undef TILE_MFMA_INT8
