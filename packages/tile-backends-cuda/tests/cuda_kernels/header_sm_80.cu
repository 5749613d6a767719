// Tiny kernels, one per tile_cuda wrapper, for test_cuda_header_sass.py.

#include "tile_cuda/mma.h"
#include "tile_cuda/ldmatrix.h"
#include "tile_cuda/async.h"

#include "mma_kernel.h"

MMA_KERNEL(k_mma_f16_f32, tile_mma_m16n8k16_f16_f32, float, unsigned short)
MMA_KERNEL(k_mma_bf16_f32, tile_mma_m16n8k16_bf16_f32, float, unsigned short)
MMA_KERNEL(k_mma_f16_f16, tile_mma_m16n8k16_f16_f16, unsigned short, unsigned short)
MMA_KERNEL(k_mma_s8_s32, tile_mma_m16n8k32_s8_s32, int, signed char)
MMA_KERNEL(k_mma_u8_s32, tile_mma_m16n8k32_u8_s32, int, unsigned char)
MMA_KERNEL(k_mma_tf32_f32, tile_mma_m16n8k8_tf32_f32, float, float)
MMA_KERNEL(k_mma_f64, tile_mma_m16n8k4_f64, double, double)

#define LDSM_KERNEL(NAME, FN, REGS)                                                \
  extern "C" __global__ void NAME(unsigned* out) {                                 \
    __shared__ __align__(16) unsigned short s[32 * 8];                             \
    s[threadIdx.x] = threadIdx.x;                                                  \
    __syncthreads();                                                               \
    unsigned r[4] = {0, 0, 0, 0};                                                  \
    FN(r, &s[threadIdx.x * 8]);                                                    \
    for (int i = 0; i < REGS; ++i) out[threadIdx.x * 4 + i] = r[i];                \
  }
LDSM_KERNEL(k_ldsm_x1, tile_ldmatrix_x1, 1)
LDSM_KERNEL(k_ldsm_x2, tile_ldmatrix_x2, 2)
LDSM_KERNEL(k_ldsm_x4, tile_ldmatrix_x4, 4)
LDSM_KERNEL(k_ldsm_x1_trans, tile_ldmatrix_x1_trans, 1)
LDSM_KERNEL(k_ldsm_x2_trans, tile_ldmatrix_x2_trans, 2)
LDSM_KERNEL(k_ldsm_x4_trans, tile_ldmatrix_x4_trans, 4)

#define CP_KERNEL(NAME, BYTES, COPY)                                               \
  extern "C" __global__ void NAME(float* out, const float* in, int n) {            \
    __shared__ __align__(16) float s[128 * 4];                                     \
    float* dst = &s[threadIdx.x * (BYTES / 4)];                                    \
    const float* src = &in[threadIdx.x * (BYTES / 4)];                             \
    COPY;                                                                          \
    tile_cp_async_commit();                                                        \
    tile_cp_async_wait<0>();                                                       \
    __syncthreads();                                                               \
    out[threadIdx.x] = s[(threadIdx.x * 7) % 128];                                 \
  }
CP_KERNEL(k_cp_async_4, 4, tile_cp_async_4(dst, src))
CP_KERNEL(k_cp_async_8, 8, tile_cp_async_8(dst, src))
CP_KERNEL(k_cp_async_16, 16, tile_cp_async_16(dst, src))
CP_KERNEL(k_cp_async_zfill_4, 4, tile_cp_async_zfill_4(dst, src, threadIdx.x < n ? 4 : 0))
CP_KERNEL(k_cp_async_zfill_8, 8, tile_cp_async_zfill_8(dst, src, threadIdx.x < n ? 8 : 0))
CP_KERNEL(k_cp_async_zfill_16, 16, tile_cp_async_zfill_16(dst, src, threadIdx.x < n ? 16 : 0))

// Two groups in flight, wait for all but the newest.
extern "C" __global__ void k_cp_async_wait_1(float* out, const float* in) {
  __shared__ __align__(16) float s[2][128 * 4];
  tile_cp_async_16(&s[0][threadIdx.x * 4], &in[threadIdx.x * 4]);
  tile_cp_async_commit();
  tile_cp_async_16(&s[1][threadIdx.x * 4], &in[512 + threadIdx.x * 4]);
  tile_cp_async_commit();
  tile_cp_async_wait<1>();
  __syncthreads();
  out[threadIdx.x] = s[0][(threadIdx.x * 7) % 512];
  tile_cp_async_wait_all();
  __syncthreads();
  out[threadIdx.x + 128] = s[1][(threadIdx.x * 7) % 512];
}
