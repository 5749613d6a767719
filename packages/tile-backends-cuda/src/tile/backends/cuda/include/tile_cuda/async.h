// tile_cuda/async.h: cp.async global -> shared copies with commit/wait groups (sm_80+).
//
// A copy of 4, 8 or 16 bytes; both addresses naturally aligned to the size.
// The _zfill forms read only `src_bytes` (0..size) bytes and zero the rest of the
// destination, which is how a predicated tail is written: pass 0 for a lane whose
// source is out of bounds (its source pointer must still be a valid address).
// Copies land in the executing thread's current group; tile_cp_async_commit()
// closes it; tile_cp_async_wait<N>() waits until at most N of this thread's most
// recent groups are pending. Other threads see the data after a barrier.
#pragma once

static __device__ __forceinline__ unsigned int tile_async_smem_addr(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

static __device__ __forceinline__ void tile_cp_async_4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n"
               :: "r"(tile_async_smem_addr(dst)), "l"(src) : "memory");
}

static __device__ __forceinline__ void tile_cp_async_8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n"
               :: "r"(tile_async_smem_addr(dst)), "l"(src) : "memory");
}

// 16 bytes bypass L1 (.cg), the form tiles streamed once through shared memory want.
static __device__ __forceinline__ void tile_cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
               :: "r"(tile_async_smem_addr(dst)), "l"(src) : "memory");
}

static __device__ __forceinline__ void tile_cp_async_zfill_4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               :: "r"(tile_async_smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}

static __device__ __forceinline__ void tile_cp_async_zfill_8(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n"
               :: "r"(tile_async_smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}

static __device__ __forceinline__ void tile_cp_async_zfill_16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(tile_async_smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}

static __device__ __forceinline__ void tile_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void tile_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

static __device__ __forceinline__ void tile_cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
