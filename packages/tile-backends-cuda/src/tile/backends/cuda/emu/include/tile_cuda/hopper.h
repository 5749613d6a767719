// tile_cuda/hopper.h for the SIMT emulator: wgmma, mbarriers, TMA, fences and setmaxnreg
// with the entry points of the CUDA header (tile/backends/cuda/include/tile_cuda/hopper.h).
//
// wgmma.mma_async is asynchronous as on the GPU: an issue records the op (its
// descriptors and the thread's accumulator and A-register addresses), commit closes a
// group, and the warpgroup-wide wait_group computes every group it covers, reading
// shared memory, the A registers and the old accumulators at that moment. Accumulators
// read before the covering wait hold their old values. Shared operands are read
// through the descriptor's start address, LBO, SBO and swizzle mode
// (runtime/simt_hopper.cpp), so a descriptor that disagrees with the data's layout
// computes the wrong product, as on the GPU.
//
// mbarriers keep phase, pending arrivals and tx-count in the block's runtime record; a
// TMA load lands (and completes its bytes) no earlier than a thread tests its
// mbarrier, so a consumer that reads a stage before waiting reads the old contents.
#pragma once

// A CUtensorMap's 128 bytes; under emulation they hold a tile_simt_tensor_map.
struct __align__(64) tile_tensor_map {
  unsigned long long opaque[16];
};
static_assert(sizeof(tile_tensor_map) == sizeof(tile_simt_tensor_map), "tensor map size");

static inline unsigned int tile_hopper_smem_addr(const void* p) { return __cvta_generic_to_shared(p); }

// ---------------------------------------------------------------- wgmma descriptors
// The start address is the byte offset in the block's dynamic shared memory (the
// emulated shared window), encoded as on the GPU: (addr & 0x3FFFF) >> 4.
static inline unsigned long long tile_wgmma_desc(const void* smem, unsigned int lbo_bytes, unsigned int sbo_bytes,
                                                 int swizzle_bytes, int line = __builtin_LINE()) {
  const unsigned char* p = static_cast<const unsigned char*>(smem);
  if (!tile_simt_shared_base || p < tile_simt_shared_base || p >= tile_simt_shared_base + tile_simt_shared_bytes)
    tile_simt_fault(TILE_SIMT_MISUSE, "wgmma descriptor: the operand is not in the block's dynamic shared memory", line);
  const unsigned long long addr = (unsigned long long)(p - tile_simt_shared_base);
  const unsigned long long mode =
      swizzle_bytes == 128 ? 1ull : swizzle_bytes == 64 ? 2ull : swizzle_bytes == 32 ? 3ull : 0ull;
  return ((addr & 0x3FFFFull) >> 4) | (((unsigned long long)(lbo_bytes & 0x3FFFFu) >> 4) << 16) |
         (((unsigned long long)(sbo_bytes & 0x3FFFFu) >> 4) << 32) | (mode << 62);
}

static inline void tile_wgmma_fence() { TILE_SIMT_FENCE(); }
// commit_group / wait_group<N> of one kind of asynchronous group (wgmma's, the bulk copies'):
// the emulator's calls, between fences.
#define TILE_SIMT_DEFINE_GROUP_SYNC(commit_name, wait_name, simt_commit, simt_wait) \
  static inline void commit_name(int line = __builtin_LINE()) {                 \
    TILE_SIMT_FENCE();                                                          \
    simt_commit(line);                                                          \
  }                                                                             \
  template <int N>                                                              \
  static inline void wait_name(int line = __builtin_LINE()) {                   \
    TILE_SIMT_FENCE();                                                          \
    simt_wait(N, line);                                                         \
    TILE_SIMT_FENCE();                                                          \
  }
TILE_SIMT_DEFINE_GROUP_SYNC(tile_wgmma_commit, tile_wgmma_wait, tile_simt_wgmma_commit, tile_simt_wgmma_wait)
static inline void tile_wgmma_fence_operand(float* d, int count) {
  (void)d;
  (void)count;
  TILE_SIMT_FENCE();
}

#define TILE_SIMT_DEFINE_WGMMA(N, DT, FLAGS)                                                                  \
  template <int TransA, int TransB>                                                                           \
  static inline void tile_wgmma_m64n##N##k16_ss_##DT##_f32(float* d, unsigned long long desc_a,               \
                                                            unsigned long long desc_b, int scale_d,           \
                                                            int line = __builtin_LINE()) {                    \
    TILE_SIMT_FENCE();                                                                                        \
    tile_simt_wgmma(N | (FLAGS), d, nullptr, desc_a, desc_b, TransA, TransB, scale_d != 0, line);             \
  }                                                                                                           \
  template <int TransB>                                                                                       \
  static inline void tile_wgmma_m64n##N##k16_rs_##DT##_f32(float* d, const void* a, unsigned long long desc_b, \
                                                            int scale_d, int line = __builtin_LINE()) {       \
    TILE_SIMT_FENCE();                                                                                        \
    tile_simt_wgmma(N | (FLAGS) | TILE_SIMT_WGMMA_RS, d, a, 0, desc_b, 0, TransB, scale_d != 0, line);        \
  }
#define TILE_SIMT_DEFINE_WGMMA_TYPES(N)              \
  TILE_SIMT_DEFINE_WGMMA(N, f16, 0)                  \
  TILE_SIMT_DEFINE_WGMMA(N, bf16, TILE_SIMT_WGMMA_BF16)
TILE_SIMT_DEFINE_WGMMA_TYPES(8)
TILE_SIMT_DEFINE_WGMMA_TYPES(16)
TILE_SIMT_DEFINE_WGMMA_TYPES(32)
TILE_SIMT_DEFINE_WGMMA_TYPES(64)
TILE_SIMT_DEFINE_WGMMA_TYPES(96)
TILE_SIMT_DEFINE_WGMMA_TYPES(128)
TILE_SIMT_DEFINE_WGMMA_TYPES(192)
TILE_SIMT_DEFINE_WGMMA_TYPES(256)
#undef TILE_SIMT_DEFINE_WGMMA_TYPES
#undef TILE_SIMT_DEFINE_WGMMA

// m64nNk32 with 8-bit operands (e4m3, e5m2): shared A and B, K-major only.
#define TILE_SIMT_DEFINE_WGMMA_8BIT(N, DT, FLAGS)                                                            \
  template <int TransA, int TransB>                                                                         \
  static inline void tile_wgmma_m64n##N##k32_ss_##DT##_f32(float* d, unsigned long long desc_a,             \
                                                            unsigned long long desc_b, int scale_d,         \
                                                            int line = __builtin_LINE()) {                  \
    static_assert(TransA == 0 && TransB == 0, "wgmma reads 8-bit operands K-major only");                   \
    TILE_SIMT_FENCE();                                                                                      \
    tile_simt_wgmma(N | (FLAGS), d, nullptr, desc_a, desc_b, 0, 0, scale_d != 0, line);                     \
  }
#define TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(N)                   \
  TILE_SIMT_DEFINE_WGMMA_8BIT(N, e4m3, TILE_SIMT_WGMMA_E4M3)   \
  TILE_SIMT_DEFINE_WGMMA_8BIT(N, e5m2, TILE_SIMT_WGMMA_E5M2)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(8)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(16)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(32)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(64)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(96)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(128)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(192)
TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES(256)
#undef TILE_SIMT_DEFINE_WGMMA_8BIT_TYPES
#undef TILE_SIMT_DEFINE_WGMMA_8BIT

// m64nNk8 with tf32 operands: shared or register A, K-major only.
#define TILE_SIMT_DEFINE_WGMMA_TF32(N)                                                                       \
  template <int TransA, int TransB>                                                                         \
  static inline void tile_wgmma_m64n##N##k8_ss_tf32_f32(float* d, unsigned long long desc_a,                \
                                                         unsigned long long desc_b, int scale_d,            \
                                                         int line = __builtin_LINE()) {                     \
    static_assert(TransA == 0 && TransB == 0, "wgmma reads tf32 operands K-major only");                    \
    TILE_SIMT_FENCE();                                                                                      \
    tile_simt_wgmma(N | TILE_SIMT_WGMMA_TF32, d, nullptr, desc_a, desc_b, 0, 0, scale_d != 0, line);        \
  }                                                                                                         \
  template <int TransB>                                                                                     \
  static inline void tile_wgmma_m64n##N##k8_rs_tf32_f32(float* d, const void* a, unsigned long long desc_b, \
                                                         int scale_d, int line = __builtin_LINE()) {        \
    static_assert(TransB == 0, "wgmma reads tf32 operands K-major only");                                   \
    TILE_SIMT_FENCE();                                                                                      \
    tile_simt_wgmma(N | TILE_SIMT_WGMMA_TF32 | TILE_SIMT_WGMMA_RS, d, a, 0, desc_b, 0, 0, scale_d != 0, line); \
  }
TILE_SIMT_DEFINE_WGMMA_TF32(8)
TILE_SIMT_DEFINE_WGMMA_TF32(16)
TILE_SIMT_DEFINE_WGMMA_TF32(32)
TILE_SIMT_DEFINE_WGMMA_TF32(64)
TILE_SIMT_DEFINE_WGMMA_TF32(96)
TILE_SIMT_DEFINE_WGMMA_TF32(128)
TILE_SIMT_DEFINE_WGMMA_TF32(192)
TILE_SIMT_DEFINE_WGMMA_TF32(256)
#undef TILE_SIMT_DEFINE_WGMMA_TF32

// ---------------------------------------------------------------- mbarrier
static inline void tile_mbarrier_init(void* bar, unsigned int count, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_mbarrier_init(bar, count, line);
}
static inline void tile_fence_barrier_init() { TILE_SIMT_FENCE(); }
static inline void tile_mbarrier_arrive(void* bar, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_mbarrier_arrive(bar, 1, line);
}
// expect-tx first, then arrive: the phase cannot complete while these bytes are outstanding.
static inline void tile_mbarrier_arrive_expect_tx(void* bar, unsigned int bytes, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_mbarrier_expect_tx(bar, bytes, line);
  tile_simt_mbarrier_arrive(bar, 1, line);
}
static inline void tile_mbarrier_expect_tx(void* bar, unsigned int bytes, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_mbarrier_expect_tx(bar, bytes, line);
}
static inline bool tile_mbarrier_try_wait(void* bar, unsigned int parity, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  const bool done = tile_simt_mbarrier_try_wait(bar, parity, line) != 0;
  TILE_SIMT_FENCE();
  return done;
}
static inline void tile_mbarrier_wait(void* bar, unsigned int parity, int line = __builtin_LINE()) {
  while (!tile_mbarrier_try_wait(bar, parity, line)) {
  }
}

// ---------------------------------------------------------------- TMA
static inline void tile_tma_load_2d(void* dst, const tile_tensor_map* map, void* bar, int c0, int c1,
                                    int line = __builtin_LINE()) {
  const int coords[2] = {c0, c1};
  TILE_SIMT_FENCE();
  tile_simt_tma_load(dst, map, bar, coords, 2, line);
}
static inline void tile_tma_load_3d(void* dst, const tile_tensor_map* map, void* bar, int c0, int c1, int c2,
                                    int line = __builtin_LINE()) {
  const int coords[3] = {c0, c1, c2};
  TILE_SIMT_FENCE();
  tile_simt_tma_load(dst, map, bar, coords, 3, line);
}
static inline void tile_tma_load_4d(void* dst, const tile_tensor_map* map, void* bar, int c0, int c1, int c2, int c3,
                                    int line = __builtin_LINE()) {
  const int coords[4] = {c0, c1, c2, c3};
  TILE_SIMT_FENCE();
  tile_simt_tma_load(dst, map, bar, coords, 4, line);
}
static inline void tile_tma_load_5d(void* dst, const tile_tensor_map* map, void* bar, int c0, int c1, int c2, int c3,
                                    int c4, int line = __builtin_LINE()) {
  const int coords[5] = {c0, c1, c2, c3, c4};
  TILE_SIMT_FENCE();
  tile_simt_tma_load(dst, map, bar, coords, 5, line);
}
// TMA stores: the emulator reads the shared box (through the async proxy) when its bulk
// group is waited for; a thread that exits before is a fault.
static inline void tile_tma_store_2d(void* src, const tile_tensor_map* map, int c0, int c1,
                                     int line = __builtin_LINE()) {
  const int coords[2] = {c0, c1};
  TILE_SIMT_FENCE();
  tile_simt_tma_store(src, map, coords, 2, line);
}
static inline void tile_tma_store_3d(void* src, const tile_tensor_map* map, int c0, int c1, int c2,
                                     int line = __builtin_LINE()) {
  const int coords[3] = {c0, c1, c2};
  TILE_SIMT_FENCE();
  tile_simt_tma_store(src, map, coords, 3, line);
}
static inline void tile_tma_store_4d(void* src, const tile_tensor_map* map, int c0, int c1, int c2, int c3,
                                     int line = __builtin_LINE()) {
  const int coords[4] = {c0, c1, c2, c3};
  TILE_SIMT_FENCE();
  tile_simt_tma_store(src, map, coords, 4, line);
}
static inline void tile_tma_store_5d(void* src, const tile_tensor_map* map, int c0, int c1, int c2, int c3, int c4,
                                     int line = __builtin_LINE()) {
  const int coords[5] = {c0, c1, c2, c3, c4};
  TILE_SIMT_FENCE();
  tile_simt_tma_store(src, map, coords, 5, line);
}
TILE_SIMT_DEFINE_GROUP_SYNC(tile_tma_store_commit, tile_tma_store_wait_read, tile_simt_bulk_commit,
                            tile_simt_bulk_wait)
#undef TILE_SIMT_DEFINE_GROUP_SYNC
// The code generator's form of a tensor-map parameter (see the CUDA header): `CUtensorMap`,
// its address passed as a 64-bit integer.
typedef tile_tensor_map CUtensorMap;
#define TILE_TMAP(address) reinterpret_cast<const tile_tensor_map*>(address)
static inline void tile_tma_load_2d(void* dst, unsigned long long map, void* bar, int c0, int c1,
                                    int line = __builtin_LINE()) {
  tile_tma_load_2d(dst, TILE_TMAP(map), bar, c0, c1, line);
}
static inline void tile_tma_load_3d(void* dst, unsigned long long map, void* bar, int c0, int c1, int c2,
                                    int line = __builtin_LINE()) {
  tile_tma_load_3d(dst, TILE_TMAP(map), bar, c0, c1, c2, line);
}
static inline void tile_tma_load_4d(void* dst, unsigned long long map, void* bar, int c0, int c1, int c2, int c3,
                                    int line = __builtin_LINE()) {
  tile_tma_load_4d(dst, TILE_TMAP(map), bar, c0, c1, c2, c3, line);
}
static inline void tile_tma_load_5d(void* dst, unsigned long long map, void* bar, int c0, int c1, int c2, int c3,
                                    int c4, int line = __builtin_LINE()) {
  tile_tma_load_5d(dst, TILE_TMAP(map), bar, c0, c1, c2, c3, c4, line);
}
static inline void tile_tma_store_2d(void* src, unsigned long long map, int c0, int c1, int line = __builtin_LINE()) {
  tile_tma_store_2d(src, TILE_TMAP(map), c0, c1, line);
}
static inline void tile_tma_store_3d(void* src, unsigned long long map, int c0, int c1, int c2,
                                     int line = __builtin_LINE()) {
  tile_tma_store_3d(src, TILE_TMAP(map), c0, c1, c2, line);
}
static inline void tile_tma_store_4d(void* src, unsigned long long map, int c0, int c1, int c2, int c3,
                                     int line = __builtin_LINE()) {
  tile_tma_store_4d(src, TILE_TMAP(map), c0, c1, c2, c3, line);
}
static inline void tile_tma_store_5d(void* src, unsigned long long map, int c0, int c1, int c2, int c3, int c4,
                                     int line = __builtin_LINE()) {
  tile_tma_store_5d(src, TILE_TMAP(map), c0, c1, c2, c3, c4, line);
}
#undef TILE_TMAP
static inline void tile_tma_prefetch_map(const tile_tensor_map* map) { (void)map; }
static inline void tile_tma_prefetch_map(unsigned long long map) { (void)map; }
static inline void tile_fence_proxy_async() {
  TILE_SIMT_FENCE();
  tile_simt_fence_proxy_async();
}

// ---------------------------------------------------------------- registers
// Register reallocation changes nothing a CPU thread can observe.
template <int N>
static inline void tile_setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24..256 in steps of 8");
}
template <int N>
static inline void tile_setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24..256 in steps of 8");
}

// ---------------------------------------------------------------- named barriers
static inline void tile_named_barrier_sync(unsigned int id, unsigned int threads, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_barrier(id, threads, 0, line);
  TILE_SIMT_FENCE();
}
// bar.arrive: count this warp's threads at barrier `id` and go on without waiting.
static inline void tile_named_barrier_arrive(unsigned int id, unsigned int threads, int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_barrier(id, threads, 1, line);
}
