// Warp collectives of the SIMT emulator: what a warp computes once all its lanes have
// arrived. Formulas follow the PTX ISA text for shfl.sync, vote.sync and ldmatrix/stmatrix
// (.m8n8 .b16). (mma.sync is the CUDA device's own: tile-backends-cuda's emu/native/simt_mma.cpp.)
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "simt_internal.h"

namespace tile_simt {

namespace {

inline bool in_mask(unsigned long long mask, unsigned lane) { return (mask >> lane) & 1ull; }

uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  return bits;
}

float bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, 4);
  return value;
}

int fail(char* error, size_t size, int status, const char* text) {
  snprintf(error, size, "%s", text);
  return status;
}

// ------------------------------------------------------------------ shuffles and votes
int shuffle(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size, char* error, size_t size) {
  const unsigned lane_mask = warp_size - 1;
  int mode = -1;
  for (unsigned lane = 0; lane < warp_size; ++lane) {
    if (!in_mask(mask, lane)) continue;
    if (mode < 0) mode = lanes[lane].i0;
    if (lanes[lane].i0 != mode) return fail(error, size, TILE_SIMT_DIVERGENCE, "lanes of one warp ran different shuffle kinds at once");
  }
  for (unsigned lane = 0; lane < warp_size; ++lane) {
    if (!in_mask(mask, lane)) continue;
    const unsigned b = (unsigned)lanes[lane].i1, c = (unsigned)lanes[lane].i2;
    const unsigned bval = b & lane_mask, cval = c & lane_mask, segmask = (c >> 8) & lane_mask;
    const unsigned max_lane = (lane & segmask) | (cval & ~segmask & lane_mask);
    const unsigned min_lane = lane & segmask;
    long j = lane;
    bool valid = false;
    switch (mode) {
      case 0: j = (long)(min_lane | (bval & ~segmask & lane_mask)); valid = j <= (long)max_lane; break;
      case 1: j = (long)lane - (long)bval; valid = j >= (long)max_lane; break;
      case 2: j = (long)lane + (long)bval; valid = j <= (long)max_lane; break;
      default: j = (long)(lane ^ bval); valid = j <= (long)max_lane; break;
    }
    if (!valid) j = lane;
    if (!in_mask(mask, (unsigned)j)) {
      snprintf(error, size, "shuffle: lane %u reads lane %ld, which is not in the member mask", lane, j);
      return TILE_SIMT_MISUSE;
    }
    lanes[lane].out = lanes[j].v0;
  }
  return TILE_SIMT_OK;
}

int vote(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size, char* error, size_t size) {
  int mode = -1;
  unsigned long long ballot = 0;
  unsigned count = 0, members = 0;
  for (unsigned lane = 0; lane < warp_size; ++lane) {
    if (!in_mask(mask, lane)) continue;
    if (mode < 0) mode = lanes[lane].i0;
    if (lanes[lane].i0 != mode) return fail(error, size, TILE_SIMT_DIVERGENCE, "lanes of one warp ran different votes at once");
    ++members;
    if (lanes[lane].i1) {
      ballot |= 1ull << lane;
      ++count;
    }
  }
  uint64_t result = 0;
  switch (mode) {
    case 0: result = ballot; break;
    case 1: result = count > 0; break;
    case 2: result = count == members; break;
    default: result = count == 0 || count == members; break;
  }
  for (unsigned lane = 0; lane < warp_size; ++lane)
    if (in_mask(mask, lane)) lanes[lane].out = result;
  return TILE_SIMT_OK;
}

// ------------------------------------------------------------------ ldmatrix / stmatrix
// Lane L (< 8 * num) gives row L % 8 of matrix L / 8. Register q of lane l holds
// matrix q: (row l/4, columns 2(l%4), 2(l%4)+1), or with .trans (rows 2(l%4), 2(l%4)+1,
// column l/4); the lower column/row goes to bits [15:0].
struct MatrixRows {
  unsigned char* rows[4][8] = {};
  int num = 0;
  bool trans = false;
};

// The rows every lane gave, checked (all 32 lanes, one shape, 16-byte aligned rows).
int matrix_rows(tile_simt_args* lanes, unsigned long long mask, bool store, MatrixRows* m, char* error,
                size_t size) {
  const int num = m->num = lanes[0].i0;
  m->trans = lanes[0].i1 != 0;
  if (mask != 0xffffffffull) return fail(error, size, TILE_SIMT_MISUSE, "ldmatrix/stmatrix need all 32 lanes of the warp");
  if (num != 1 && num != 2 && num != 4) return fail(error, size, TILE_SIMT_MISUSE, "ldmatrix/stmatrix take .x1, .x2 or .x4");
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (lanes[lane].i0 != num || lanes[lane].i1 != lanes[0].i1)
      return fail(error, size, TILE_SIMT_DIVERGENCE, "lanes of one warp ran different ldmatrix/stmatrix shapes at once");
  }
  for (unsigned lane = 0; lane < 8u * (unsigned)num; ++lane) {
    const void* row = store ? lanes[lane].p0 : lanes[lane].p1;
    if (((uintptr_t)row & 15u) != 0) {
      snprintf(error, size, "%s: lane %u's row address %p is not 16-byte aligned", store ? "stmatrix" : "ldmatrix", lane, row);
      return TILE_SIMT_MISUSE;
    }
    m->rows[lane / 8][lane % 8] = (unsigned char*)row;
  }
  return TILE_SIMT_OK;
}

// Where the 16-bit half h (0: bits [15:0]) of register q of `lane` lives in the rows.
unsigned char* matrix_element(const MatrixRows& m, unsigned lane, int q, int h) {
  const unsigned g = lane >> 2, t = lane & 3;
  const unsigned r = m.trans ? 2 * t + h : g, col = m.trans ? g : 2 * t + h;
  return m.rows[q][r] + 2 * col;
}

int ldmatrix(tile_simt_args* lanes, unsigned long long mask, char* error, size_t size) {
  MatrixRows m;
  if (int status = matrix_rows(lanes, mask, false, &m, error, size)) return status;
  uint32_t values[32][4];
  for (unsigned lane = 0; lane < 32; ++lane) {
    for (int q = 0; q < m.num; ++q) {
      uint16_t half[2];
      for (int h = 0; h < 2; ++h) memcpy(&half[h], matrix_element(m, lane, q, h), 2);
      values[lane][q] = (uint32_t)half[0] | ((uint32_t)half[1] << 16);
    }
  }
  // written only after every row was read: a lane's registers may alias nothing shared
  for (unsigned lane = 0; lane < 32; ++lane) memcpy(lanes[lane].p0, values[lane], 4 * (size_t)m.num);
  return TILE_SIMT_OK;
}

int stmatrix(tile_simt_args* lanes, unsigned long long mask, char* error, size_t size) {
  MatrixRows m;
  if (int status = matrix_rows(lanes, mask, true, &m, error, size)) return status;
  for (unsigned lane = 0; lane < 32; ++lane) {
    uint32_t regs[4];
    memcpy(regs, lanes[lane].p1, 4 * (size_t)m.num);
    for (int q = 0; q < m.num; ++q) {
      for (int h = 0; h < 2; ++h) {
        const uint16_t half = (uint16_t)(regs[q] >> (16 * h));
        memcpy(matrix_element(m, lane, q, h), &half, 2);
      }
    }
  }
  return TILE_SIMT_OK;
}

}  // namespace

// ------------------------------------------------------------------ number formats
float half_to_float(uint16_t bits) {
  const uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = ldexpf((float)mantissa, -24);
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t float_to_half(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN stays NaN
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {  // below the smallest normal half: a multiple of 2^-24, rounded to even
    const float scaled = bits_float(abs) * 16777216.0f;  // exact: a power-of-two scale
    return (uint16_t)(sign | (uint16_t)nearbyintf(scaled));
  }
  const uint32_t exponent = (abs >> 23) - 112u, mantissa = abs & 0x7fffffu;
  uint32_t result = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return (uint16_t)(sign | result);
}

float bfloat16_to_float(uint16_t bits) { return bits_float((uint32_t)bits << 16); }

float e4m3_to_float(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 7;
  if (exponent == 0xf && mantissa == 7) return NAN;
  if (exponent == 0) return sign * ldexpf((float)mantissa, -9);
  return sign * ldexpf((float)(8 + mantissa), exponent - 10);
}

float e5m2_to_float(uint8_t bits) { return half_to_float((uint16_t)((uint16_t)bits << 8)); }

}  // namespace tile_simt

// The number formats as C entry points, for vendors' native sources (tile_simt.h).
extern "C" {
float tile_simt_half_to_float(uint16_t bits) { return tile_simt::half_to_float(bits); }
uint16_t tile_simt_float_to_half(float value) { return tile_simt::float_to_half(value); }
float tile_simt_bfloat16_to_float(uint16_t bits) { return tile_simt::bfloat16_to_float(bits); }
float tile_simt_e4m3_to_float(uint8_t bits) { return tile_simt::e4m3_to_float(bits); }
float tile_simt_e5m2_to_float(uint8_t bits) { return tile_simt::e5m2_to_float(bits); }
}

namespace tile_simt {

int compute_collective(int kind, tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                       char* error, size_t error_size) {
  switch (kind) {
    case TILE_SIMT_SHFL: return shuffle(lanes, mask, warp_size, error, error_size);
    case TILE_SIMT_VOTE: return vote(lanes, mask, warp_size, error, error_size);
    case TILE_SIMT_SYNCWARP: return TILE_SIMT_OK;
    case TILE_SIMT_LDMATRIX: return ldmatrix(lanes, mask, error, error_size);
    case TILE_SIMT_STMATRIX: return stmatrix(lanes, mask, error, error_size);
    default:
      snprintf(error, error_size, "unknown warp collective kind %d", kind);
      return TILE_SIMT_MISUSE;
  }
}

}  // namespace tile_simt
