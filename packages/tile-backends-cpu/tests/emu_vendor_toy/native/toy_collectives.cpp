// The toy vendor's warp collective for the SIMT emulator: toy::warp_sum (include/tile_toy.h).
// Built by the emulator into the toy device's library, which it loads before toy kernels.
#include <stdio.h>
#include <string.h>

#include "tile_simt.h"

extern "C" int toy_warp_sum_compute(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                    char* error, unsigned long error_size) {
  if (warp_size != 16) {
    snprintf(error, error_size, "toy::warp_sum runs on 16-lane warps, not %u", warp_size);
    return TILE_SIMT_MISUSE;
  }
  float sum = 0.0f;
  int tag = -1;
  for (unsigned lane = 0; lane < warp_size; ++lane) {
    if (!((mask >> lane) & 1ull)) continue;
    if (tag < 0) tag = lanes[lane].i0;
    if (lanes[lane].i0 != tag) {
      snprintf(error, error_size, "toy::warp_sum: lane %u passed tag %d, the warp's first lane tag %d", lane,
               lanes[lane].i0, tag);
      return TILE_SIMT_MISUSE;
    }
    float value;
    memcpy(&value, &lanes[lane].v0, sizeof value);
    sum += value;
  }
  uint64_t bits = 0;
  memcpy(&bits, &sum, sizeof sum);
  for (unsigned lane = 0; lane < warp_size; ++lane) lanes[lane].out = bits;
  return TILE_SIMT_OK;
}
