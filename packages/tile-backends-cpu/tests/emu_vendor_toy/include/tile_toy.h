// tile_toy.h for the SIMT emulator: the device header of "toy", a made-up GPU vendor whose
// warps have 16 lanes and whose one special instruction, toy::warp_sum, adds a float across
// a warp in a single step. It lives only in tile-backends-cpu's tests, to show that a vendor
// plugs into the emulator with its own header and collective and no edit to the emulator.
//
// Kernel bodies use the GPU C++ dialect the emulator provides (tile_simt_dialect.h:
// __global__, threadIdx, __shared__, __syncthreads); the preamble of the device's
// registration defines TOY_LANES, which must agree with the registered warp size.
#pragma once

#include <stdint.h>
#include <string.h>

#include "tile_simt_dialect.h"

#ifndef TOY_LANES
#error "TOY_LANES comes from the toy device's preamble"
#endif

// The native compute function of toy::warp_sum (native/toy_collectives.cpp).
extern "C" int toy_warp_sum_compute(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                    char* error, unsigned long error_size);

namespace toy {

inline int lane() { return (int)(threadIdx.x % TOY_LANES); }
inline int warp() { return (int)(threadIdx.x / TOY_LANES); }

// Every lane of the warp passes its value and gets the warp's sum (lanes added in lane order).
// `tag` must be the same on every lane: a lane that passes another one is a misuse.
inline float warp_sum(float value, int tag = 0, int line = __builtin_LINE()) {
  tile_simt_args args{};
  memcpy(&args.v0, &value, sizeof value);
  args.i0 = tag;
  TILE_SIMT_FENCE();
  const uint64_t bits = tile_simt_warp_call(toy_warp_sum_compute, "toy::warp_sum", (1ull << TOY_LANES) - 1, &args, line);
  TILE_SIMT_FENCE();
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace toy
