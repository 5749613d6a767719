// tile_cuda/async.h for the SIMT emulator: cp.async with real asynchrony. A copy reads
// its source at issue and joins the thread's open group; commit closes the group; the
// bytes reach shared memory only at the wait_group that covers the group, so a kernel
// that reads a stage before waiting for it reads what was there before.
#pragma once

static inline void tile_cp_async_4(void* dst, const void* src) { tile_simt_cp_async(dst, src, 4, 4); }
static inline void tile_cp_async_8(void* dst, const void* src) { tile_simt_cp_async(dst, src, 8, 8); }
static inline void tile_cp_async_16(void* dst, const void* src) { tile_simt_cp_async(dst, src, 16, 16); }
static inline void tile_cp_async_zfill_4(void* dst, const void* src, int src_bytes) {
  tile_simt_cp_async(dst, src, 4, src_bytes);
}
static inline void tile_cp_async_zfill_8(void* dst, const void* src, int src_bytes) {
  tile_simt_cp_async(dst, src, 8, src_bytes);
}
static inline void tile_cp_async_zfill_16(void* dst, const void* src, int src_bytes) {
  tile_simt_cp_async(dst, src, 16, src_bytes);
}
static inline void tile_cp_async_commit() { tile_simt_cp_async_commit(); }
template <int N>
static inline void tile_cp_async_wait() {
  TILE_SIMT_FENCE();
  tile_simt_cp_async_wait(N);
  TILE_SIMT_FENCE();
}
static inline void tile_cp_async_wait_all() {
  TILE_SIMT_FENCE();
  tile_simt_cp_async_wait_all();
  TILE_SIMT_FENCE();
}
