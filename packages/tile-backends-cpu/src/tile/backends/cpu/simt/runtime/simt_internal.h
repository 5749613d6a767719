// Internal declarations shared by the runtime's translation units.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "tile_simt.h"

namespace tile_simt {

// Computes a completed warp collective for every lane of `mask`. Returns a
// tile_simt_status; on a fault writes a message into `error`.
int compute_collective(int kind, tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                       char* error, size_t error_size);

// AMD MFMA (TILE_SIMT_MFMA), in simt_mfma.cpp.
int compute_mfma(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size, char* error,
                 size_t error_size);

float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
float e4m3_to_float(uint8_t bits);
float e5m2_to_float(uint8_t bits);

}  // namespace tile_simt
