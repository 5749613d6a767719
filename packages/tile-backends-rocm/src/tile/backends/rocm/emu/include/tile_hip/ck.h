// tile_hip/ck.h under the emulator: T.gemm(..., impl="ck") kernels.
//
// On the GPU each tile_ck_mfma_* runs composable_kernel's ck_tile warp gemm, whose lane
// distribution include/tile_hip/ck.h static_asserts equal to tile's MFMA layouts. CK's device
// code (amdgcn builtins) cannot run on the CPU, so here each one is the emulated MFMA of the
// same shape: emulation checks tile's side of the CK path (operand loads, accumulator layout);
// the equality of the layouts is checked where CK is compiled.
#pragma once

#define TILE_CK_AS(name, acc)                                                                        \
  static inline void tile_ck_##name(acc* d, const void* a, const void* b, int line = __builtin_LINE()) { \
    tile_##name(d, a, b, line);                                                                      \
  }
TILE_CK_AS(mfma_f32_16x16x16_f16, float)
TILE_CK_AS(mfma_f32_32x32x8_f16, float)
TILE_CK_AS(mfma_f32_16x16x16_bf16, float)
TILE_CK_AS(mfma_f32_32x32x8_bf16, float)
TILE_CK_AS(mfma_i32_16x16x32_i8, int)
TILE_CK_AS(mfma_i32_32x32x16_i8, int)
#undef TILE_CK_AS
