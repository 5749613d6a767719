// mma.sync as a warp collective of the SIMT emulator: a native source of the CUDA
// backend's emulated device (tile.backends.cuda.emu), built into the device's library,
// which the emulator loads before CUDA kernels. tile_cuda/mma.h hands
// tile_cuda_mma_compute to tile_simt_warp_call; the 32nd lane to arrive computes
// D = A * B + D for the warp. Formulas follow the PTX ISA's mma.sync fragment layouts
// (g = lane >> 2, t = lane % 4); inputs are read exactly, accumulation is fp32 in k order
// (s32, wrapping, for int8).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tile_simt.h"
#include "tile_cuda/mma_kinds.h"

namespace {

float bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, 4);
  return value;
}

int fail(char* error, unsigned long size, int status, const char* text) {
  snprintf(error, size, "%s", text);
  return status;
}

struct MmaShape {
  int k;          // 16, 32 or 8
  int a_elems;    // per lane
  int b_elems;
};

// (m, k) of element i of lane's A fragment, (k, n) of B, for each input family.
void a_coord(int kind, unsigned lane, int i, int* m, int* k) {
  const int g = (int)(lane >> 2), t = (int)(lane & 3);
  switch (kind) {
    case TILE_SIMT_MMA_M16N8K8_TF32_F32:
      *m = g + 8 * (i & 1);
      *k = t + 4 * (i >> 1);
      return;
    case TILE_SIMT_MMA_M16N8K32_S8_S32:
    case TILE_SIMT_MMA_M16N8K32_U8_S32:
    case TILE_SIMT_MMA_M16N8K32_E4M3_F32:
    case TILE_SIMT_MMA_M16N8K32_E5M2_F32:
      *m = g + 8 * ((i >> 2) & 1);
      *k = 4 * t + (i & 3) + 16 * (i >> 3);
      return;
    default:  // 16-bit inputs, m16n8k16
      *m = g + 8 * ((i >> 1) & 1);
      *k = 2 * t + (i & 1) + 8 * (i >> 2);
      return;
  }
}

void b_coord(int kind, unsigned lane, int i, int* k, int* n) {
  const int g = (int)(lane >> 2), t = (int)(lane & 3);
  *n = g;
  switch (kind) {
    case TILE_SIMT_MMA_M16N8K8_TF32_F32: *k = t + 4 * i; return;
    case TILE_SIMT_MMA_M16N8K32_S8_S32:
    case TILE_SIMT_MMA_M16N8K32_U8_S32:
    case TILE_SIMT_MMA_M16N8K32_E4M3_F32:
    case TILE_SIMT_MMA_M16N8K32_E5M2_F32: *k = 4 * t + (i & 3) + 16 * (i >> 2); return;
    default: *k = 2 * t + (i & 1) + 8 * (i >> 1); return;
  }
}

MmaShape shape_of(int kind) {
  switch (kind) {
    case TILE_SIMT_MMA_M16N8K8_TF32_F32: return {8, 4, 2};
    case TILE_SIMT_MMA_M16N8K32_S8_S32:
    case TILE_SIMT_MMA_M16N8K32_U8_S32:
    case TILE_SIMT_MMA_M16N8K32_E4M3_F32:
    case TILE_SIMT_MMA_M16N8K32_E5M2_F32: return {32, 16, 8};
    default: return {16, 8, 4};
  }
}

// Element i of a lane's input fragment as a float (exact for every input type).
float input_value(int kind, const void* frag, int i) {
  const unsigned char* bytes = (const unsigned char*)frag;
  uint16_t h;
  uint32_t w;
  switch (kind) {
    case TILE_SIMT_MMA_M16N8K16_BF16_F32: memcpy(&h, bytes + 2 * i, 2); return tile_simt_bfloat16_to_float(h);
    case TILE_SIMT_MMA_M16N8K32_E4M3_F32: return tile_simt_e4m3_to_float(bytes[i]);
    case TILE_SIMT_MMA_M16N8K32_E5M2_F32: return tile_simt_e5m2_to_float(bytes[i]);
    case TILE_SIMT_MMA_M16N8K8_TF32_F32:  // the instruction reads the top 19 bits of each float
      memcpy(&w, bytes + 4 * i, 4);
      return bits_float(w & 0xffffe000u);
    default: memcpy(&h, bytes + 2 * i, 2); return tile_simt_half_to_float(h);
  }
}

// Two mma.m8n8k4 f64 (DMMA) as one m16n8k4: lane 4g + t holds A's (g, t) and (g + 8, t),
// B's (k = t, n = g) and the m16n8 accumulator's c0..c3; each product is one fused
// multiply-add in double, in k order.
int dmma_m16n8k4(tile_simt_args* lanes) {
  double a[16][4], b[4][8], c[16][8];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const int g = (int)(lane >> 2), t = (int)(lane & 3);
    const double* pa = (const double*)lanes[lane].p1;
    const double* pc = (const double*)lanes[lane].p0;
    a[g][t] = pa[0];
    a[g + 8][t] = pa[1];
    b[t][g] = *(const double*)lanes[lane].p2;
    for (int i = 0; i < 4; ++i) c[g + 8 * (i >> 1)][2 * t + (i & 1)] = pc[i];
  }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 4; ++k) c[m][n] = fma(a[m][k], b[k][n], c[m][n]);
  for (unsigned lane = 0; lane < 32; ++lane) {
    double* pd = (double*)lanes[lane].p0;
    for (int i = 0; i < 4; ++i) pd[i] = c[(lane >> 2) + 8 * (i >> 1)][2 * (lane & 3) + (i & 1)];
  }
  return TILE_SIMT_OK;
}

}  // namespace

// The warp collective's compute function (tile_simt_compute_fn).
extern "C" int tile_cuda_mma_compute(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                     char* error, unsigned long size) {
  if (warp_size != 32) return fail(error, size, TILE_SIMT_MISUSE, "mma.sync runs on 32-lane warps");
  if (mask != 0xffffffffull) return fail(error, size, TILE_SIMT_MISUSE, "mma.sync needs all 32 lanes of the warp");
  const int kind = lanes[0].i0;
  for (unsigned lane = 1; lane < 32; ++lane)
    if (lanes[lane].i0 != kind) return fail(error, size, TILE_SIMT_DIVERGENCE, "lanes of one warp ran different mma shapes at once");
  if (kind == TILE_SIMT_MMA_M16N8K4_F64) return dmma_m16n8k4(lanes);
  const MmaShape shape = shape_of(kind);
  const bool integer = kind == TILE_SIMT_MMA_M16N8K32_S8_S32 || kind == TILE_SIMT_MMA_M16N8K32_U8_S32;
  if (integer) {
    int32_t a[16][32], b[32][8];
    uint32_t c[16][8];
    const bool is_signed = kind == TILE_SIMT_MMA_M16N8K32_S8_S32;
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned char* pa = (const unsigned char*)lanes[lane].p1;
      const unsigned char* pb = (const unsigned char*)lanes[lane].p2;
      for (int i = 0; i < shape.a_elems; ++i) {
        int m, k;
        a_coord(kind, lane, i, &m, &k);
        a[m][k] = is_signed ? (int32_t)(int8_t)pa[i] : (int32_t)pa[i];
      }
      for (int i = 0; i < shape.b_elems; ++i) {
        int k, n;
        b_coord(kind, lane, i, &k, &n);
        b[k][n] = is_signed ? (int32_t)(int8_t)pb[i] : (int32_t)pb[i];
      }
      const int32_t* pc = (const int32_t*)lanes[lane].p0;
      for (int i = 0; i < 4; ++i) c[(lane >> 2) + 8 * (i >> 1)][2 * (lane & 3) + (i & 1)] = (uint32_t)pc[i];
    }
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        uint32_t acc = c[m][n];
        for (int k = 0; k < 32; ++k) acc += (uint32_t)(a[m][k] * b[k][n]);  // s32 wraps
        c[m][n] = acc;
      }
    for (unsigned lane = 0; lane < 32; ++lane) {
      int32_t* pd = (int32_t*)lanes[lane].p0;
      for (int i = 0; i < 4; ++i) pd[i] = (int32_t)c[(lane >> 2) + 8 * (i >> 1)][2 * (lane & 3) + (i & 1)];
    }
    return TILE_SIMT_OK;
  }
  float a[16][32], b[32][8], c[16][8];
  const bool half_acc = kind == TILE_SIMT_MMA_M16N8K16_F16_F16;
  for (unsigned lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < shape.a_elems; ++i) {
      int m, k;
      a_coord(kind, lane, i, &m, &k);
      a[m][k] = input_value(kind, lanes[lane].p1, i);
    }
    for (int i = 0; i < shape.b_elems; ++i) {
      int k, n;
      b_coord(kind, lane, i, &k, &n);
      b[k][n] = input_value(kind, lanes[lane].p2, i);
    }
    for (int i = 0; i < 4; ++i) {
      float value;
      if (half_acc) {
        uint16_t h;
        memcpy(&h, (const unsigned char*)lanes[lane].p0 + 2 * i, 2);
        value = tile_simt_half_to_float(h);
      } else {
        memcpy(&value, (const unsigned char*)lanes[lane].p0 + 4 * i, 4);
      }
      c[(lane >> 2) + 8 * (i >> 1)][2 * (lane & 3) + (i & 1)] = value;
    }
  }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float acc = c[m][n];  // fp32 accumulation in k order
      for (int k = 0; k < shape.k; ++k) acc += a[m][k] * b[k][n];
      c[m][n] = acc;
    }
  for (unsigned lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const float value = c[(lane >> 2) + 8 * (i >> 1)][2 * (lane & 3) + (i & 1)];
      if (half_acc) {
        const uint16_t h = tile_simt_float_to_half(value);
        memcpy((unsigned char*)lanes[lane].p0 + 2 * i, &h, 2);
      } else {
        memcpy((unsigned char*)lanes[lane].p0 + 4 * i, &value, 4);
      }
    }
  return TILE_SIMT_OK;
}
