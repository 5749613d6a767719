// Tiny kernels, one per tile_cuda wrapper, for test_cuda_header_sass.py.
#include "tile_cuda/mma.h"
#include "tile_cuda/ldmatrix.h"
#include "tile_cuda/hopper.h"

#define WGMMA_SS_KERNEL(NAME, FN, N, TA, TB)                                        \
  extern "C" __global__ void NAME(float* out) {                                     \
    __shared__ __align__(1024) unsigned short a[64 * 64];                           \
    __shared__ __align__(1024) unsigned short b[64 * 256];                          \
    a[threadIdx.x] = threadIdx.x; b[threadIdx.x] = threadIdx.x;                     \
    tile_fence_proxy_async();                                                       \
    __syncthreads();                                                                \
    float d[N / 2];                                                                 \
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f;                                     \
    tile_wgmma_fence();                                                             \
    FN<TA, TB>(d, tile_wgmma_desc(a, 16, 1024, 128), tile_wgmma_desc(b, 16, 1024, 128), 1); \
    tile_wgmma_commit();                                                            \
    tile_wgmma_wait<0>();                                                           \
    tile_wgmma_fence_operand(d, N / 2);                                             \
    for (int i = 0; i < N / 2; ++i) out[threadIdx.x * (N / 2) + i] = d[i];          \
  }
WGMMA_SS_KERNEL(k_wgmma_ss_f16_n64, tile_wgmma_m64n64k16_ss_f16_f32, 64, 0, 0)
WGMMA_SS_KERNEL(k_wgmma_ss_f16_n128, tile_wgmma_m64n128k16_ss_f16_f32, 128, 0, 1)
WGMMA_SS_KERNEL(k_wgmma_ss_bf16_n256, tile_wgmma_m64n256k16_ss_bf16_f32, 256, 1, 0)
WGMMA_SS_KERNEL(k_wgmma_ss_f16_n8, tile_wgmma_m64n8k16_ss_f16_f32, 8, 0, 0)
WGMMA_SS_KERNEL(k_wgmma_ss_e4m3_n128, tile_wgmma_m64n128k32_ss_e4m3_f32, 128, 0, 0)
WGMMA_SS_KERNEL(k_wgmma_ss_e5m2_n64, tile_wgmma_m64n64k32_ss_e5m2_f32, 64, 0, 0)
WGMMA_SS_KERNEL(k_wgmma_ss_e4m3_n256, tile_wgmma_m64n256k32_ss_e4m3_f32, 256, 0, 0)

#define WGMMA_RS_KERNEL(NAME, FN, N)                                                \
  extern "C" __global__ void NAME(float* out, const unsigned* regs) {               \
    __shared__ __align__(1024) unsigned short b[64 * 256];                          \
    b[threadIdx.x] = threadIdx.x;                                                   \
    tile_fence_proxy_async();                                                       \
    __syncthreads();                                                                \
    unsigned a[4] = {regs[threadIdx.x], regs[threadIdx.x + 128], regs[threadIdx.x + 256], regs[threadIdx.x + 384]}; \
    float d[N / 2];                                                                 \
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f;                                     \
    tile_wgmma_fence();                                                             \
    FN<1>(d, a, tile_wgmma_desc(b, 8192, 1024, 128), 0);                            \
    tile_wgmma_commit();                                                            \
    tile_wgmma_wait<0>();                                                           \
    tile_wgmma_fence_operand(d, N / 2);                                             \
    for (int i = 0; i < N / 2; ++i) out[threadIdx.x * (N / 2) + i] = d[i];          \
  }
WGMMA_RS_KERNEL(k_wgmma_rs_f16_n128, tile_wgmma_m64n128k16_rs_f16_f32, 128)
WGMMA_RS_KERNEL(k_wgmma_rs_bf16_n64, tile_wgmma_m64n64k16_rs_bf16_f32, 64)

// One TMA box per block into a 128B-swizzled tile, completed through an mbarrier.
extern "C" __global__ void k_tma_mbarrier(float* out, const __grid_constant__ tile_tensor_map map) {
  __shared__ __align__(1024) unsigned short tile[64 * 64];
  __shared__ __align__(8) unsigned long long full;
  if (threadIdx.x == 0) {
    tile_tma_prefetch_map(&map);
    tile_mbarrier_init(&full, 1);
    tile_fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tile_mbarrier_arrive_expect_tx(&full, sizeof(tile));
    tile_tma_load_2d(tile, &map, &full, 0, blockIdx.x * 64);
  }
  tile_mbarrier_wait(&full, 0);
  out[blockIdx.x * blockDim.x + threadIdx.x] = tile[threadIdx.x * 7];
}

// Plain arrive (consumer release) and a bounded try_wait.
extern "C" __global__ void k_mbarrier_arrive(int* out) {
  __shared__ __align__(8) unsigned long long empty;
  if (threadIdx.x == 0) tile_mbarrier_init(&empty, blockDim.x);
  __syncthreads();
  tile_mbarrier_arrive(&empty);
  out[threadIdx.x] = tile_mbarrier_try_wait(&empty, 0) ? 1 : 0;
}

extern "C" __global__ void k_stmatrix(unsigned short* out, const unsigned* in) {
  __shared__ __align__(16) unsigned short s[4][32 * 8];
  unsigned r[4] = {in[threadIdx.x], in[threadIdx.x + 32], in[threadIdx.x + 64], in[threadIdx.x + 96]};
  tile_stmatrix_x1(&s[0][threadIdx.x * 8], r);
  tile_stmatrix_x2(&s[1][threadIdx.x * 8], r);
  tile_stmatrix_x4(&s[2][threadIdx.x * 8], r);
  tile_stmatrix_x4_trans(&s[3][threadIdx.x * 8], r);
  __syncthreads();
  for (int q = 0; q < 4; ++q) out[q * 256 + threadIdx.x] = s[q][(threadIdx.x * 9) % 256];
}

extern "C" __global__ void __launch_bounds__(384, 1) k_setmaxnreg(float* out) {
  int wg = threadIdx.x / 128;
  if (wg == 0) {
    tile_setmaxnreg_dec<40>();
    out[threadIdx.x] = 0.f;
  } else {
    tile_setmaxnreg_inc<232>();
    out[threadIdx.x] = 1.f;
  }
}
