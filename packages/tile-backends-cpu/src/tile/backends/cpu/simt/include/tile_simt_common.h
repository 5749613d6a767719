// tile_simt_common.h: the vendor-neutral tile:: device entry points, on the host.
//
// tile's GPU layer (tile.ir.gpu) lowers copies, atomics, casts and barriers to the same
// tile:: calls for every vendor; each vendor's device header implements them for its GPU.
// Under the emulator they are the same on every vendor, so they live here (fast math and casts
// in tile-ir's tile_gpu.h, which this file includes), and a vendor's emulated device header
// (tile_cuda.h, tile_hip.h) includes this file and adds what is its own: lane and warp ids for
// its warp size, shuffles, matrix instructions, async copies.
#pragma once

#include <stdint.h>
#include <string.h>

#include "tile_simt_dialect.h"

#define TILE_DEVICE inline
#define TILE_SIMT_EMULATED 1

namespace tile {

// ---------------------------------------------------------------- thread and block ids
TILE_DEVICE int thread_x() { return (int)threadIdx.x; }
TILE_DEVICE int block_x() { return (int)blockIdx.x; }
TILE_DEVICE int block_y() { return (int)blockIdx.y; }
TILE_DEVICE int block_z() { return (int)blockIdx.z; }

// ---------------------------------------------------------------- barriers and fences
TILE_DEVICE void sync_threads(int line = __builtin_LINE()) { __syncthreads(line); }
TILE_DEVICE void fence_block() { __threadfence_block(); }
TILE_DEVICE void fence_device() { __threadfence(); }

// ---------------------------------------------------------------- vector loads and stores
TILE_DEVICE void copy_128(void* dst, const void* src) { memcpy(dst, src, 16); }
TILE_DEVICE void copy_64(void* dst, const void* src) { memcpy(dst, src, 8); }
TILE_DEVICE void copy_32(void* dst, const void* src) { memcpy(dst, src, 4); }

// ---------------------------------------------------------------- atomics
TILE_DEVICE float atomic_add(float* address, float value) { return atomicAdd(address, value); }
TILE_DEVICE double atomic_add(double* address, double value) { return atomicAdd(address, value); }
TILE_DEVICE int atomic_add(int* address, int value) { return atomicAdd(address, value); }
TILE_DEVICE unsigned atomic_add(unsigned* address, unsigned value) { return atomicAdd(address, value); }
TILE_DEVICE int64_t atomic_add(int64_t* address, int64_t value) {  // int64_t: long here, not long long
  return (int64_t)atomicAdd((long long*)address, (long long)value);
}
TILE_DEVICE uint64_t atomic_add(uint64_t* address, uint64_t value) {
  return (uint64_t)atomicAdd((unsigned long long*)address, (unsigned long long)value);
}
TILE_DEVICE __half atomic_add(__half* address, __half value) { return atomicAdd(address, value); }
TILE_DEVICE __nv_bfloat16 atomic_add(__nv_bfloat16* address, __nv_bfloat16 value) { return atomicAdd(address, value); }
TILE_DEVICE int atomic_max(int* address, int value) { return atomicMax(address, value); }
TILE_DEVICE int atomic_min(int* address, int value) { return atomicMin(address, value); }
TILE_DEVICE unsigned atomic_max(unsigned* address, unsigned value) { return atomicMax(address, value); }
TILE_DEVICE unsigned atomic_min(unsigned* address, unsigned value) { return atomicMin(address, value); }
TILE_DEVICE float atomic_max(float* address, float value) { return atomicMax(address, value); }
TILE_DEVICE float atomic_min(float* address, float value) { return atomicMin(address, value); }
// 16-bit floats: compared as float; a NaN on either side compares false and is skipped, as on GPUs.
#define TILE_SIMT_16BIT_EXTREMES(T)                                                                  \
  TILE_DEVICE T atomic_max(T* address, T value) {                                                  \
    return tile_simt_dialect::atomic_update<T, uint16_t>(                                          \
        address, [value](T old) { return (float)old < (float)value ? value : old; });              \
  }                                                                                                \
  TILE_DEVICE T atomic_min(T* address, T value) {                                                  \
    return tile_simt_dialect::atomic_update<T, uint16_t>(                                          \
        address, [value](T old) { return (float)old > (float)value ? value : old; });              \
  }
TILE_SIMT_16BIT_EXTREMES(__half)
TILE_SIMT_16BIT_EXTREMES(__nv_bfloat16)
#undef TILE_SIMT_16BIT_EXTREMES

// ---------------------------------------------------------------- what tile_gpu.h leaves to the vendor
TILE_DEVICE float fast_rsqrt(float x) { return rsqrtf(x); }
TILE_DEVICE half to_half(float x) { return __float2half_rn(x); }

}  // namespace tile

// The other fast math and casts read the same as on every GPU: tile-ir's tile_gpu.h (its folder,
// tile.ir.gpu.INCLUDE_DIR, is on the emulator's include path). Under TILE_SIMT_EMULATED it leaves
// the vector moves and atomics to the host versions above.
typedef __nv_bfloat16 tile_bf16;  // the name tile_gpu.h gives bfloat16 on every vendor
#include "tile_gpu.h"

// A vendor's matrix instruction as a warp collective: each lane passes its accumulator (d),
// A and B registers and the instruction's kind (i0); the vendor's `compute` (its device's
// native source) reads every lane's registers and writes every lane's d.
static inline void tile_simt_matrix_call(tile_simt_compute_fn compute, const char* name, unsigned long long mask,
                                         int kind, void* d, const void* a, const void* b, int line) {
  tile_simt_args args{};
  args.p0 = d;
  args.p1 = a;
  args.p2 = b;
  args.i0 = kind;
  tile_simt_dialect::warp_call(compute, name, mask, &args, line);
}
