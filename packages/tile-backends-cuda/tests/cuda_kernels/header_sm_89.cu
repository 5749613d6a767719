// Tiny kernels, one per tile_cuda wrapper, for test_cuda_header_sass.py.
#include "tile_cuda/mma.h"
#include "mma_kernel.h"
MMA_KERNEL(k_mma_e4m3_f32, tile_mma_m16n8k32_e4m3_f32, float, unsigned char)
MMA_KERNEL(k_mma_e5m2_f32, tile_mma_m16n8k32_e5m2_f32, float, unsigned char)
