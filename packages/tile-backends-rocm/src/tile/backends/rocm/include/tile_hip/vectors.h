// tile_hip/vectors.h: the 16-bit vector types TVM's CUDA prelude names (half4, nv_bfloat16
// x2 and x4 as tile_bf162 / tile_bf164), for the HIP device header and its emulated variant
// alike. The including header defines TILE_DEVICE, half and tile_bf16 first.
#pragma once

// Four 16-bit values moved as one 8-byte word (TVM's half4 / nv_bfloat164 vector type).
template <typename T>
struct __attribute__((aligned(8))) tile_vec4 {
  T x, y, z, w;
};
template <typename T>
struct __attribute__((aligned(4))) tile_vec2 {
  T x, y;
};
typedef tile_vec4<half> half4;
typedef tile_vec4<tile_bf16> tile_bf164;
typedef tile_vec2<tile_bf16> tile_bf162;
TILE_DEVICE tile_bf162 make_tile_bf162(tile_bf16 x, tile_bf16 y) { return tile_bf162{x, y}; }
TILE_DEVICE half4 make_half4(half x, half y, half z, half w) { return half4{x, y, z, w}; }
TILE_DEVICE tile_bf164 make_tile_bf164(tile_bf16 x, tile_bf16 y, tile_bf16 z, tile_bf16 w) { return tile_bf164{x, y, z, w}; }
