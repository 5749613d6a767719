// MMA_KERNEL(NAME, FN, DT, AT): a kernel that runs one tile_cuda mma wrapper FN on
// per-lane fragments read from global memory (DT: accumulator type, AT: operand element type),
// for the header_<arch>.cu kernels of test_cuda_header_sass.py.
#pragma once

#define MMA_KERNEL(NAME, FN, DT, AT)                                               \
  extern "C" __global__ void NAME(DT* out, const AT* a, const AT* b) {             \
    DT d[4] = {out[0], out[1], out[2], out[3]};                                    \
    AT ar[16], br[8];                                                              \
    for (int i = 0; i < 16; ++i) ar[i] = a[threadIdx.x * 16 + i];                  \
    for (int i = 0; i < 8; ++i) br[i] = b[threadIdx.x * 8 + i];                    \
    FN(d, ar, br);                                                                 \
    for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i];                   \
  }
