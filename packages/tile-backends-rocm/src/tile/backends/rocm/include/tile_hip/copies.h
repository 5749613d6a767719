// tile_hip/copies.h: T.ptx_cp_async and its group calls (CUDA's cp.async wrappers of
// tile_cuda/async.h) for the HIP device header and its emulated variant alike. HIP has no
// cp.async: each copy is done when the call returns, so committing and waiting for a group
// have nothing left to do. As on CUDA, other threads see the copied bytes after a barrier.
// The including header defines TILE_DEVICE first.
#pragma once

#include <stdint.h>

template <int kBytes>
TILE_DEVICE void tile_hip_copy_bytes(void* dst, const void* src) {
  if constexpr (kBytes == 4) {
    *(uint32_t*)dst = *(const uint32_t*)src;
  } else if constexpr (kBytes == 8) {
    *(uint64_t*)dst = *(const uint64_t*)src;
  } else {
    static_assert(kBytes == 16, "cp.async moves 4, 8 or 16 bytes");
    ((uint64_t*)dst)[0] = ((const uint64_t*)src)[0];
    ((uint64_t*)dst)[1] = ((const uint64_t*)src)[1];
  }
}

// cp.async's zero fill: the first src_bytes bytes come from src, the rest of the kBytes are
// zero (src_bytes 0 reads nothing: a false predicate).
template <int kBytes>
TILE_DEVICE void tile_hip_copy_zfill(void* dst, const void* src, int src_bytes) {
  if (src_bytes >= kBytes) {
    tile_hip_copy_bytes<kBytes>(dst, src);
    return;
  }
  for (int i = 0; i < kBytes; ++i) {
    ((unsigned char*)dst)[i] = i < src_bytes ? ((const unsigned char*)src)[i] : (unsigned char)0;
  }
}

TILE_DEVICE void tile_cp_async_4(void* dst, const void* src) { tile_hip_copy_bytes<4>(dst, src); }
TILE_DEVICE void tile_cp_async_8(void* dst, const void* src) { tile_hip_copy_bytes<8>(dst, src); }
TILE_DEVICE void tile_cp_async_16(void* dst, const void* src) { tile_hip_copy_bytes<16>(dst, src); }
TILE_DEVICE void tile_cp_async_zfill_4(void* dst, const void* src, int n) { tile_hip_copy_zfill<4>(dst, src, n); }
TILE_DEVICE void tile_cp_async_zfill_8(void* dst, const void* src, int n) { tile_hip_copy_zfill<8>(dst, src, n); }
TILE_DEVICE void tile_cp_async_zfill_16(void* dst, const void* src, int n) { tile_hip_copy_zfill<16>(dst, src, n); }
TILE_DEVICE void tile_cp_async_commit() {}
template <int kPending>
TILE_DEVICE void tile_cp_async_wait() {}
