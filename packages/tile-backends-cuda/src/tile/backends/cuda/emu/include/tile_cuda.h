// tile_cuda.h for the SIMT emulator: the same entry points as the CUDA backend's device
// header (tile/backends/cuda/include/tile_cuda.h), implemented on the host. A kernel's
// generated source includes "tile_cuda.h"; compiling it with this folder on the include
// path runs it on the CPU through the emulator's runtime, unchanged.
//
// Sub-headers mirror the CUDA ones: tile_cuda/mma.h, tile_cuda/ldmatrix.h, tile_cuda/async.h,
// tile_cuda/hopper.h.
#pragma once

#include <stdint.h>

#include "tile_simt_common.h"  // the vendor-neutral tile:: entry points (tile-backends-cpu)

#define TILE_HAS_FP8 1

namespace tile {

// ---------------------------------------------------------------- lane and warp ids
TILE_DEVICE int lane_id() { return (int)(threadIdx.x & 31u); }
TILE_DEVICE int warp_id() { return (int)(threadIdx.x >> 5); }

// ---------------------------------------------------------------- warp barrier
TILE_DEVICE void sync_warp(unsigned mask = 0xffffffffu, int line = __builtin_LINE()) { __syncwarp(mask, line); }

// ---------------------------------------------------------------- warp shuffles and votes
template <typename T>
TILE_DEVICE T shfl_xor(T value, int lane_mask, int width = 32, int line = __builtin_LINE()) {
  return __shfl_xor_sync(0xffffffffu, value, lane_mask, width, line);
}
template <typename T>
TILE_DEVICE T shfl_down(T value, unsigned delta, int width = 32, int line = __builtin_LINE()) {
  return __shfl_down_sync(0xffffffffu, value, delta, width, line);
}
template <typename T>
TILE_DEVICE T shfl_idx(T value, int src_lane, int width = 32, int line = __builtin_LINE()) {
  return __shfl_sync(0xffffffffu, value, src_lane, width, line);
}
TILE_DEVICE unsigned ballot(bool predicate, int line = __builtin_LINE()) {
  return __ballot_sync(0xffffffffu, predicate, line);
}
TILE_DEVICE bool vote_any(bool predicate, int line = __builtin_LINE()) { return __any_sync(0xffffffffu, predicate, line); }
TILE_DEVICE bool vote_all(bool predicate, int line = __builtin_LINE()) { return __all_sync(0xffffffffu, predicate, line); }

// ---------------------------------------------------------------- paired and fp8 conversions
TILE_DEVICE half2 to_half2(float a, float b) { return __floats2half2_rn(a, b); }
TILE_DEVICE __nv_bfloat162 to_bfloat162(float a, float b) { return __floats2bfloat162_rn(a, b); }
TILE_DEVICE float e4m3_to_float(uint8_t bits) { return tile_simt_fp::fp8_to_float(bits, 3, 7, false); }
TILE_DEVICE float e5m2_to_float(uint8_t bits) { return tile_simt_fp::fp8_to_float(bits, 2, 15, true); }
TILE_DEVICE uint8_t float_to_e4m3(float x) { return tile_simt_fp::float_to_fp8(x, 3, 7, false); }
TILE_DEVICE uint8_t float_to_e5m2(float x) { return tile_simt_fp::float_to_fp8(x, 2, 15, true); }

}  // namespace tile

#include "tile_cuda/mma.h"
#include "tile_cuda/ldmatrix.h"
#include "tile_cuda/async.h"
#include "tile_cuda/hopper.h"
#include "tile_cuda/ptx.h"  // inline PTX of T.import_source code, as rewritten by inline_ptx.py
