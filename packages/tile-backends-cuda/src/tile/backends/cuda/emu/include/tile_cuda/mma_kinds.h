// tile_cuda/mma_kinds.h for the SIMT emulator: the mma.sync shapes and types, shared by
// tile_cuda/mma.h (each lane passes one as i0) and native/simt_mma.cpp (which computes them).
#pragma once

enum tile_simt_mma_kind {
  TILE_SIMT_MMA_M16N8K16_F16_F32 = 1,
  TILE_SIMT_MMA_M16N8K16_BF16_F32 = 2,
  TILE_SIMT_MMA_M16N8K16_F16_F16 = 3,
  TILE_SIMT_MMA_M16N8K32_S8_S32 = 4,
  TILE_SIMT_MMA_M16N8K32_U8_S32 = 5,
  TILE_SIMT_MMA_M16N8K32_E4M3_F32 = 6,
  TILE_SIMT_MMA_M16N8K32_E5M2_F32 = 7,
  TILE_SIMT_MMA_M16N8K8_TF32_F32 = 8,
  TILE_SIMT_MMA_M16N8K4_F64 = 9,  // two m8n8k4 f64 (DMMA), rows 0-7 and 8-15
};
