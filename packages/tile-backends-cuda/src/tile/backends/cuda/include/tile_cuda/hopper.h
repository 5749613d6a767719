// tile_cuda/hopper.h: sm_90 / sm_90a instructions. wgmma needs sm_90a; mbarrier
// transaction counts, TMA, fence.proxy.async and setmaxnreg need sm_90.
//
// wgmma.mma_async m64nNk16 (f16/bf16 in, f32 accumulators), m64nNk32 (e4m3/e5m2 in,
// shared K-major operands only; SASS QGMMA) and m64nNk8 (tf32 in, K-major operands),
// one warpgroup (128 threads). `d` is the
// thread's N/2 accumulators in PTX order, which is the local order of
// tile.layout.hardware.wgmma_m64nnk16_d(N) (for either K): element i is row
// 16 * warp + g + 8 * ((i >> 1) & 1), column 8 * (i >> 2) + 2t + (i & 1).
// Shared operands are passed as 64-bit matrix descriptors (tile_wgmma_desc).
// _ss: A and B from shared memory; TransA/TransB = 1 reads that operand MN-major.
// _rs: A from 4 registers (8 halves in the mma A-fragment order of rows
// 16 * warp ..), B from shared memory. scale_d = 0 ignores the old accumulators
// (d = a * b), 1 accumulates. Issue tile_wgmma_fence() before the first wgmma
// that touches registers written by other instructions, tile_wgmma_commit() after
// a batch and tile_wgmma_wait<N>() before reading the accumulators.
#pragma once

// An opaque CUtensorMap (cuda.h's CUtensorMap_st), so the header needs no cuda.h:
// 128 bytes, 64-byte aligned, passed to kernels as `const __grid_constant__`.
struct __align__(64) tile_tensor_map {
  unsigned long long opaque[16];
};

static __device__ __forceinline__ unsigned int tile_hopper_smem_addr(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- wgmma descriptors
// Matrix descriptor (PTX "Matrix Descriptor Format"): start address, leading and
// stride byte offsets, each stored >> 4 in 14 bits; swizzle in bits 62-63 (0 none,
// 1 128B, 2 64B, 3 32B). `swizzle_bytes` is 0, 32, 64 or 128. The swizzle pattern is
// assumed to start on its boundary (base offset 0).
static __device__ __forceinline__ unsigned long long tile_wgmma_desc(const void* smem, unsigned int lbo_bytes,
                                                                     unsigned int sbo_bytes, int swizzle_bytes) {
  unsigned long long mode = swizzle_bytes == 128 ? 1ull : swizzle_bytes == 64 ? 2ull : swizzle_bytes == 32 ? 3ull : 0ull;
  unsigned long long addr = tile_hopper_smem_addr(smem);
  return ((addr & 0x3FFFFull) >> 4) | (((unsigned long long)(lbo_bytes & 0x3FFFFu) >> 4) << 16) |
         (((unsigned long long)(sbo_bytes & 0x3FFFFu) >> 4) << 32) | (mode << 62);
}

static __device__ __forceinline__ void tile_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

static __device__ __forceinline__ void tile_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void tile_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// Keeps the compiler from moving accesses to an accumulator across an async wgmma.
static __device__ __forceinline__ void tile_wgmma_fence_operand(float* d, int count) {
#pragma unroll
  for (int i = 0; i < count; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

#define TILE_WGMMA_D8 \
  "{%0, %1, %2, %3}"
#define TILE_WGMMA_D16 \
  "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define TILE_WGMMA_D32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define TILE_WGMMA_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TILE_WGMMA_D96 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47}"
#define TILE_WGMMA_D128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63}"
#define TILE_WGMMA_D192 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define TILE_WGMMA_D256 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, " \
  "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

#define TILE_F4(p, i) "+f"((p)[i]), "+f"((p)[(i) + 1]), "+f"((p)[(i) + 2]), "+f"((p)[(i) + 3])
#define TILE_F8(p, i) TILE_F4(p, i), TILE_F4(p, (i) + 4)
#define TILE_F16(p, i) TILE_F8(p, i), TILE_F8(p, (i) + 8)
#define TILE_F32(p, i) TILE_F16(p, i), TILE_F16(p, (i) + 16)
#define TILE_F64(p, i) TILE_F32(p, i), TILE_F32(p, (i) + 32)
#define TILE_F128(p, i) TILE_F64(p, i), TILE_F64(p, (i) + 64)
#define TILE_WGMMA_OPS8(d) TILE_F4(d, 0)
#define TILE_WGMMA_OPS16(d) TILE_F8(d, 0)
#define TILE_WGMMA_OPS32(d) TILE_F16(d, 0)
#define TILE_WGMMA_OPS64(d) TILE_F32(d, 0)
#define TILE_WGMMA_OPS96(d) TILE_F32(d, 0), TILE_F16(d, 32)
#define TILE_WGMMA_OPS128(d) TILE_F64(d, 0)
#define TILE_WGMMA_OPS192(d) TILE_F64(d, 0), TILE_F32(d, 64)
#define TILE_WGMMA_OPS256(d) TILE_F128(d, 0)

// R0..R6 are the operand numbers after the N/2 accumulators (R0 = N/2).
#define TILE_DEFINE_WGMMA(N, DT, PTXDT, R0, R1, R2, R3, R4, R5, R6)                                     \
  template <int TransA, int TransB>                                                                    \
  static __device__ __forceinline__ void tile_wgmma_m64n##N##k16_ss_##DT##_f32(                        \
      float* d, unsigned long long desc_a, unsigned long long desc_b, int scale_d) {                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #R2 ", 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTXDT "." PTXDT " " TILE_WGMMA_D##N \
                 ", %" #R0 ", %" #R1 ", p, 1, 1, %" #R3 ", %" #R4 ";\n}\n"                            \
                 : TILE_WGMMA_OPS##N(d)                                                                \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransA), "n"(TransB));                  \
  }                                                                                                    \
  template <int TransB>                                                                                \
  static __device__ __forceinline__ void tile_wgmma_m64n##N##k16_rs_##DT##_f32(                        \
      float* d, const void* a, unsigned long long desc_b, int scale_d) {                               \
    const unsigned int* ar = reinterpret_cast<const unsigned int*>(a);                                 \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #R5 ", 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTXDT "." PTXDT " " TILE_WGMMA_D##N \
                 ", {%" #R0 ", %" #R1 ", %" #R2 ", %" #R3 "}, %" #R4 ", p, 1, 1, %" #R6 ";\n}\n"      \
                 : TILE_WGMMA_OPS##N(d)                                                                \
                 : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "l"(desc_b), "r"(scale_d),          \
                   "n"(TransB));                                                                       \
  }

TILE_DEFINE_WGMMA(8, f16, "f16", 4, 5, 6, 7, 8, 9, 10)
TILE_DEFINE_WGMMA(8, bf16, "bf16", 4, 5, 6, 7, 8, 9, 10)
TILE_DEFINE_WGMMA(16, f16, "f16", 8, 9, 10, 11, 12, 13, 14)
TILE_DEFINE_WGMMA(16, bf16, "bf16", 8, 9, 10, 11, 12, 13, 14)
TILE_DEFINE_WGMMA(32, f16, "f16", 16, 17, 18, 19, 20, 21, 22)
TILE_DEFINE_WGMMA(32, bf16, "bf16", 16, 17, 18, 19, 20, 21, 22)
TILE_DEFINE_WGMMA(64, f16, "f16", 32, 33, 34, 35, 36, 37, 38)
TILE_DEFINE_WGMMA(64, bf16, "bf16", 32, 33, 34, 35, 36, 37, 38)
TILE_DEFINE_WGMMA(96, f16, "f16", 48, 49, 50, 51, 52, 53, 54)
TILE_DEFINE_WGMMA(96, bf16, "bf16", 48, 49, 50, 51, 52, 53, 54)
TILE_DEFINE_WGMMA(128, f16, "f16", 64, 65, 66, 67, 68, 69, 70)
TILE_DEFINE_WGMMA(128, bf16, "bf16", 64, 65, 66, 67, 68, 69, 70)
TILE_DEFINE_WGMMA(192, f16, "f16", 96, 97, 98, 99, 100, 101, 102)
TILE_DEFINE_WGMMA(192, bf16, "bf16", 96, 97, 98, 99, 100, 101, 102)
TILE_DEFINE_WGMMA(256, f16, "f16", 128, 129, 130, 131, 132, 133, 134)
TILE_DEFINE_WGMMA(256, bf16, "bf16", 128, 129, 130, 131, 132, 133, 134)

// m64nNk32 with 8-bit operands (e4m3, e5m2), f32 accumulators: A and B from shared memory,
// K-major only (PTX: imm-trans-a/b exist for .f16/.bf16 alone, so TransA = TransB = 0; the
// template keeps the call form of the 16-bit wrappers). R0..R2: desc_a, desc_b, scale_d.
#define TILE_DEFINE_WGMMA_8BIT(N, DT, PTXDT, R0, R1, R2)                                                 \
  template <int TransA, int TransB>                                                                    \
  static __device__ __forceinline__ void tile_wgmma_m64n##N##k32_ss_##DT##_f32(                        \
      float* d, unsigned long long desc_a, unsigned long long desc_b, int scale_d) {                   \
    static_assert(TransA == 0 && TransB == 0, "wgmma reads 8-bit operands K-major only");              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #R2 ", 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32." PTXDT "." PTXDT " " TILE_WGMMA_D##N \
                 ", %" #R0 ", %" #R1 ", p, 1, 1;\n}\n"                                                 \
                 : TILE_WGMMA_OPS##N(d)                                                                \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                            \
  }
#define TILE_DEFINE_WGMMA_8BIT_TYPES(N, R0, R1, R2)         \
  TILE_DEFINE_WGMMA_8BIT(N, e4m3, "e4m3", R0, R1, R2)       \
  TILE_DEFINE_WGMMA_8BIT(N, e5m2, "e5m2", R0, R1, R2)
TILE_DEFINE_WGMMA_8BIT_TYPES(8, 4, 5, 6)
TILE_DEFINE_WGMMA_8BIT_TYPES(16, 8, 9, 10)
TILE_DEFINE_WGMMA_8BIT_TYPES(32, 16, 17, 18)
TILE_DEFINE_WGMMA_8BIT_TYPES(64, 32, 33, 34)
TILE_DEFINE_WGMMA_8BIT_TYPES(96, 48, 49, 50)
TILE_DEFINE_WGMMA_8BIT_TYPES(128, 64, 65, 66)
TILE_DEFINE_WGMMA_8BIT_TYPES(192, 96, 97, 98)
TILE_DEFINE_WGMMA_8BIT_TYPES(256, 128, 129, 130)
#undef TILE_DEFINE_WGMMA_8BIT_TYPES
#undef TILE_DEFINE_WGMMA_8BIT

// m64nNk8 with tf32 operands (float32 bits; the tensor core reads the top 19), f32
// accumulators, K-major only (no imm-trans for .tf32). _ss: A and B from shared memory
// (R0..R2: desc_a, desc_b, scale_d). _rs: A from 4 registers a0..a3, one element each:
// row 16 * warp + g + 8 * (i & 1), column t + 4 * (i >> 1) (R0..R5: a0..a3, desc_b, scale_d).
#define TILE_DEFINE_WGMMA_TF32(N, R0, R1, R2, R3, R4, R5)                                               \
  template <int TransA, int TransB>                                                                    \
  static __device__ __forceinline__ void tile_wgmma_m64n##N##k8_ss_tf32_f32(                           \
      float* d, unsigned long long desc_a, unsigned long long desc_b, int scale_d) {                   \
    static_assert(TransA == 0 && TransB == 0, "wgmma reads tf32 operands K-major only");               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #R2 ", 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " TILE_WGMMA_D##N              \
                 ", %" #R0 ", %" #R1 ", p, 1, 1;\n}\n"                                                 \
                 : TILE_WGMMA_OPS##N(d)                                                                \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                            \
  }                                                                                                    \
  template <int TransB>                                                                                \
  static __device__ __forceinline__ void tile_wgmma_m64n##N##k8_rs_tf32_f32(                           \
      float* d, const void* a, unsigned long long desc_b, int scale_d) {                               \
    static_assert(TransB == 0, "wgmma reads tf32 operands K-major only");                              \
    const unsigned int* ar = reinterpret_cast<const unsigned int*>(a);                                 \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #R5 ", 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " TILE_WGMMA_D##N              \
                 ", {%" #R0 ", %" #R1 ", %" #R2 ", %" #R3 "}, %" #R4 ", p, 1, 1;\n}\n"                 \
                 : TILE_WGMMA_OPS##N(d)                                                                \
                 : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "l"(desc_b), "r"(scale_d));         \
  }
TILE_DEFINE_WGMMA_TF32(8, 4, 5, 6, 7, 8, 9)
TILE_DEFINE_WGMMA_TF32(16, 8, 9, 10, 11, 12, 13)
TILE_DEFINE_WGMMA_TF32(32, 16, 17, 18, 19, 20, 21)
TILE_DEFINE_WGMMA_TF32(64, 32, 33, 34, 35, 36, 37)
TILE_DEFINE_WGMMA_TF32(96, 48, 49, 50, 51, 52, 53)
TILE_DEFINE_WGMMA_TF32(128, 64, 65, 66, 67, 68, 69)
TILE_DEFINE_WGMMA_TF32(192, 96, 97, 98, 99, 100, 101)
TILE_DEFINE_WGMMA_TF32(256, 128, 129, 130, 131, 132, 133)
#undef TILE_DEFINE_WGMMA_TF32

// ---------------------------------------------------------------- mbarrier
// An 8-byte, 8-byte aligned object in shared memory (PTX "mbarrier").
static __device__ __forceinline__ void tile_mbarrier_init(void* bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(tile_hopper_smem_addr(bar)), "r"(count) : "memory");
}

// mbarrier objects, arrive and test_wait are sm_80+; the init fence, try_wait, the sink `_`
// destination and the transaction counts are sm_90+ (PTX "mbarrier"). On sm_80-89 the
// helpers below use the sm_80 forms, so hand-written mbarrier code (T.alloc_barrier,
// T.mbarrier_arrive, T.mbarrier_wait_parity) compiles for every arch tile targets from sm_80.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TILE_MBARRIER_SM80 1
#endif

// Makes barrier initialisation visible to the async proxy (TMA) and other threads. Before
// sm_90 there is no async proxy or cluster: the block barrier that follows the initialisation
// (T.alloc_barrier's) is what makes it visible.
static __device__ __forceinline__ void tile_fence_barrier_init() {
#ifndef TILE_MBARRIER_SM80
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

static __device__ __forceinline__ void tile_mbarrier_arrive(void* bar) {
#ifdef TILE_MBARRIER_SM80
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [%0];\n}\n"
               :: "r"(tile_hopper_smem_addr(bar)) : "memory");
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(tile_hopper_smem_addr(bar)) : "memory");
#endif
}

// expect-tx(bytes) then arrive: the phase completes once every arrival is in and
// the `bytes` announced here have landed (TMA complete-tx).
static __device__ __forceinline__ void tile_mbarrier_arrive_expect_tx(void* bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(tile_hopper_smem_addr(bar)), "r"(bytes) : "memory");
}

// expect-tx(bytes) without arriving: the current phase also waits for `bytes` more of
// asynchronous copies (PTX mbarrier.expect_tx, sm_90).
static __device__ __forceinline__ void tile_mbarrier_expect_tx(void* bar, unsigned int bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n"
               :: "r"(tile_hopper_smem_addr(bar)), "r"(bytes) : "memory");
}

// True once the phase with parity `parity` has completed (PTX try_wait.parity; test_wait.parity,
// which does not suspend the thread for a while, before sm_90).
static __device__ __forceinline__ bool tile_mbarrier_try_wait(void* bar, unsigned int parity) {
  unsigned int done;
#ifdef TILE_MBARRIER_SM80
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done) : "r"(tile_hopper_smem_addr(bar)), "r"(parity) : "memory");
#else
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done) : "r"(tile_hopper_smem_addr(bar)), "r"(parity) : "memory");
#endif
  return done != 0;
}

static __device__ __forceinline__ void tile_mbarrier_wait(void* bar, unsigned int parity) {
  while (!tile_mbarrier_try_wait(bar, parity)) {
  }
}

// ---------------------------------------------------------------- TMA
// 2-D tiled load of the box at element coordinates (c0 = innermost, c1) into
// `dst` (128-byte aligned; 1024 for the 128B swizzle); completes `bytes` on `bar`.
static __device__ __forceinline__ void tile_tma_load_2d(void* dst, const tile_tensor_map* map, void* bar, int c0,
                                                        int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      :: "r"(tile_hopper_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(tile_hopper_smem_addr(bar))
      : "memory");
}

// 3- to 5-D tiled loads (a tile of a higher-rank tensor: box extent 1 on the dims it
// does not span), coordinates innermost first as in the 2-D load.
static __device__ __forceinline__ void tile_tma_load_3d(void* dst, const tile_tensor_map* map, void* bar, int c0,
                                                        int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
      :: "r"(tile_hopper_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(tile_hopper_smem_addr(bar))
      : "memory");
}

static __device__ __forceinline__ void tile_tma_load_4d(void* dst, const tile_tensor_map* map, void* bar, int c0,
                                                        int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
      :: "r"(tile_hopper_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(tile_hopper_smem_addr(bar))
      : "memory");
}

static __device__ __forceinline__ void tile_tma_load_5d(void* dst, const tile_tensor_map* map, void* bar, int c0,
                                                        int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n"
      :: "r"(tile_hopper_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
         "r"(tile_hopper_smem_addr(bar))
      : "memory");
}

// 2- to 5-D tiled stores (shared -> global) of the box at element coordinates c0 (innermost)
// ... from `src` (128-byte aligned; 1024 for the 128B swizzle). Out-of-bound elements are not
// written. The store joins this thread's bulk async-group: tile_tma_store_commit closes it and
// tile_tma_store_wait_read<N> waits until all but the newest N groups have read their
// shared source. Generic-proxy writes of `src` need tile_fence_proxy_async() first.
static __device__ __forceinline__ void tile_tma_store_2d(void* src, const tile_tensor_map* map, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n"
               :: "l"(map), "r"(tile_hopper_smem_addr(src)), "r"(c0), "r"(c1) : "memory");
}

static __device__ __forceinline__ void tile_tma_store_3d(void* src, const tile_tensor_map* map, int c0, int c1,
                                                         int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               :: "l"(map), "r"(tile_hopper_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}

static __device__ __forceinline__ void tile_tma_store_4d(void* src, const tile_tensor_map* map, int c0, int c1,
                                                         int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               :: "l"(map), "r"(tile_hopper_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}

static __device__ __forceinline__ void tile_tma_store_5d(void* src, const tile_tensor_map* map, int c0, int c1,
                                                         int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];\n"
               :: "l"(map), "r"(tile_hopper_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
               : "memory");
}

static __device__ __forceinline__ void tile_tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void tile_tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}

// A kernel's tensor-map parameter as the code generator writes it: `const __grid_constant__
// CUtensorMap name` (cuda.h's, which TVM's preamble includes; under NVRTC, where it does not,
// the same 128 bytes as tile_tensor_map), its address passed as a 64-bit integer. The
// overloads read the map at that address.
#ifdef __CUDACC_RTC__
typedef tile_tensor_map CUtensorMap;
#endif
#define TILE_TMAP(address) reinterpret_cast<const tile_tensor_map*>(address)
static __device__ __forceinline__ void tile_tma_load_2d(void* dst, unsigned long long map, void* bar, int c0, int c1) {
  tile_tma_load_2d(dst, TILE_TMAP(map), bar, c0, c1);
}
static __device__ __forceinline__ void tile_tma_load_3d(void* dst, unsigned long long map, void* bar, int c0, int c1,
                                                        int c2) {
  tile_tma_load_3d(dst, TILE_TMAP(map), bar, c0, c1, c2);
}
static __device__ __forceinline__ void tile_tma_load_4d(void* dst, unsigned long long map, void* bar, int c0, int c1,
                                                        int c2, int c3) {
  tile_tma_load_4d(dst, TILE_TMAP(map), bar, c0, c1, c2, c3);
}
static __device__ __forceinline__ void tile_tma_load_5d(void* dst, unsigned long long map, void* bar, int c0, int c1,
                                                        int c2, int c3, int c4) {
  tile_tma_load_5d(dst, TILE_TMAP(map), bar, c0, c1, c2, c3, c4);
}
static __device__ __forceinline__ void tile_tma_store_2d(void* src, unsigned long long map, int c0, int c1) {
  tile_tma_store_2d(src, TILE_TMAP(map), c0, c1);
}
static __device__ __forceinline__ void tile_tma_store_3d(void* src, unsigned long long map, int c0, int c1, int c2) {
  tile_tma_store_3d(src, TILE_TMAP(map), c0, c1, c2);
}
static __device__ __forceinline__ void tile_tma_store_4d(void* src, unsigned long long map, int c0, int c1, int c2,
                                                         int c3) {
  tile_tma_store_4d(src, TILE_TMAP(map), c0, c1, c2, c3);
}
static __device__ __forceinline__ void tile_tma_store_5d(void* src, unsigned long long map, int c0, int c1, int c2,
                                                         int c3, int c4) {
  tile_tma_store_5d(src, TILE_TMAP(map), c0, c1, c2, c3, c4);
}
#undef TILE_TMAP

static __device__ __forceinline__ void tile_tma_prefetch_map(const tile_tensor_map* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(map) : "memory");
}
// The same for a tensor-map parameter's address as the code generator writes it (see
// tile_tma_load_2d's overloads above).
static __device__ __forceinline__ void tile_tma_prefetch_map(unsigned long long map) {
  tile_tma_prefetch_map(reinterpret_cast<const tile_tensor_map*>(map));
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy
// (TMA store, wgmma) reads.
static __device__ __forceinline__ void tile_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---------------------------------------------------------------- registers
// Warpgroup-wide register reallocation (producer warps give, consumers take).
template <int N>
static __device__ __forceinline__ void tile_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
}

template <int N>
static __device__ __forceinline__ void tile_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
}

// ---------------------------------------------------------------- named barriers
// bar.sync on barrier `id` (0-15) for `threads` threads (a multiple of 32): a
// warp-specialized kernel's consumers synchronise among themselves on id 1 while
// the producer warps never reach it (id 0 is __syncthreads()).
static __device__ __forceinline__ void tile_named_barrier_sync(unsigned int id, unsigned int threads) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
// bar.arrive: the calling threads count towards barrier `id` and go on without waiting
// (a producer signals consumers that wait with tile_named_barrier_sync).
static __device__ __forceinline__ void tile_named_barrier_arrive(unsigned int id, unsigned int threads) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
