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

// One wgmma.mma_async of a warpgroup (128 threads): operands and each thread's registers.
struct WgmmaOp {
  int kind = 0;  // N | an input type (TILE_SIMT_WGMMA_BF16, _E4M3, _E5M2; f16 without) | TILE_SIMT_WGMMA_RS
  unsigned long long desc_a = 0, desc_b = 0;
  int trans_a = 0, trans_b = 0, scale_d = 0, line = 0;
  float* d[128] = {};
  const void* a[128] = {};
};

// D = A * B (+ D) for the warpgroup, reading shared operands through their descriptors
// relative to the shared window `smem` of `smem_bytes`. `async_view` (null: not checked)
// is the async proxy's copy of the window: an operand byte that differs there was
// written by the generic proxy with no fence.proxy.async since, which is reported.
// Returns a tile_simt_status.
int compute_wgmma(const WgmmaOp& op, unsigned char* smem, unsigned long long smem_bytes,
                  const unsigned char* async_view, char* error, size_t error_size);

// A TMA tiled load: writes the box into dst (swizzled per the map) and sets *bytes to the
// byte count that completes on the mbarrier. Returns a tile_simt_status.
int tma_load(const tile_simt_tensor_map& map, unsigned char* dst, const int* coords, int rank,
             unsigned char* smem, unsigned long long smem_bytes, long long* bytes, char* error,
             size_t error_size);

// A TMA tiled store: writes the box at `coords` from the shared tile src (swizzled per the map)
// into the tensor, skipping out-of-bound elements. It reads through the async proxy
// (`async_view`, the async proxy's copy of the window; null: not checked): a byte the generic
// proxy changed with no fence.proxy.async since is a fault. Returns a tile_simt_status.
int tma_store(const tile_simt_tensor_map& map, const unsigned char* src, const int* coords, int rank,
              const unsigned char* smem, unsigned long long smem_bytes, const unsigned char* async_view,
              char* error, size_t error_size);

float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
float e4m3_to_float(uint8_t bits);
float e5m2_to_float(uint8_t bits);

}  // namespace tile_simt
