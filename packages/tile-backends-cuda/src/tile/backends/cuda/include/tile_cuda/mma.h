// tile_cuda/mma.h: warp-level tensor-core instructions (mma.sync), sm_80+ (and sm_75, below).
//
// Every operand is a pointer to a thread's fragment registers in PTX element
// order: element i of a fragment (a_i, b_i, c_i in the PTX ISA "Matrix Fragments
// for mma.m16n8k*" sections) is local index i of the tile-layout Fragment
// (tile.layout.hardware.mma_fragment), so a per-thread array stored in local-index
// order is passed as is. 16-bit and 8-bit elements pack low-to-high into 32-bit
// registers (element 2r in bits [15:0] of register r), which is exactly how an
// array of half/bf16/int8 lies in memory.
//
// All functions accumulate in place: d = a * b + d.
#pragma once

#define TILE_MMA_U32(p, i) (reinterpret_cast<const unsigned int*>(p)[i])

// The instructions with four 32-bit accumulators (f32 or s32) in place, A in four registers
// and B in two: one definition, the PTX shape and types and the accumulator's C type and
// asm constraint ("+f" for f32, "+r" for s32) are the parameters.
#define TILE_MMA_M16N8(NAME, SHAPE_TYPES, D_TYPE, D_CONSTRAINT)                                              \
  static __device__ __forceinline__ void NAME(D_TYPE* d, const void* a, const void* b) {                    \
    asm volatile("mma.sync.aligned." SHAPE_TYPES " "                                                        \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                        \
                 : D_CONSTRAINT(d[0]), D_CONSTRAINT(d[1]), D_CONSTRAINT(d[2]), D_CONSTRAINT(d[3])            \
                 : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)),               \
                   "r"(TILE_MMA_U32(a, 3)), "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));              \
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
// Turing (sm_75) has no m16n8k16 f16 or m16n8k32 int8 mma, but mma.m16n8k8 .f16 and
// mma.m8n8k16 .s8/.u8 (PTX ISA, "Matrix Fragments for mma.m16n8k8" and "for mma.m8n8k16"),
// whose fragments are pieces of the larger ones, register for register:
//  * m16n8k16 f16: A regs {0, 1} (rows g, g + 8; k 2t..2t+1) and B reg 0 (k 2t..2t+1) are
//    m16n8k8's A and B for k 0..7; A regs {2, 3} and B reg 1 the same for k 8..15.
//  * m16n8k32 s8/u8: A reg h + 2q (row g + 8h, k 4t + 16q ..) and B reg q are m8n8k16's A and B
//    for rows 8h.. and k 16q..; its two accumulators are C regs 2h, 2h + 1 (row g + 8h).
// So each is issued as the smaller instructions over the same registers.
#define TILE_MMA_K8_F16(D_CONSTRAINT, TYPES, d, a0, a1, b0)                                                \
  asm volatile("mma.sync.aligned.m16n8k8.row.col." TYPES " "                                              \
               "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"                                    \
               : D_CONSTRAINT(d[0]), D_CONSTRAINT(d[1]), D_CONSTRAINT(d[2]), D_CONSTRAINT(d[3])            \
               : "r"(a0), "r"(a1), "r"(b0))

static __device__ __forceinline__ void tile_mma_m16n8k16_f16_f32(float* d, const void* a, const void* b) {
  TILE_MMA_K8_F16("+f", "f32.f16.f16.f32", d, TILE_MMA_U32(a, 0), TILE_MMA_U32(a, 1), TILE_MMA_U32(b, 0));
  TILE_MMA_K8_F16("+f", "f32.f16.f16.f32", d, TILE_MMA_U32(a, 2), TILE_MMA_U32(a, 3), TILE_MMA_U32(b, 1));
}
#undef TILE_MMA_K8_F16

static __device__ __forceinline__ void tile_mma_m16n8k16_f16_f16(void* d, const void* a, const void* b) {
  unsigned int* dr = reinterpret_cast<unsigned int*>(d);
  for (int half = 0; half < 2; ++half) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3}, {%4}, {%0, %1};\n"
                 : "+r"(dr[0]), "+r"(dr[1])
                 : "r"(TILE_MMA_U32(a, 2 * half)), "r"(TILE_MMA_U32(a, 2 * half + 1)),
                   "r"(TILE_MMA_U32(b, half)));
  }
}

#define TILE_MMA_M8N8K16(NAME, TYPES)                                                                       \
  static __device__ __forceinline__ void NAME(int* d, const void* a, const void* b) {                       \
    for (int h = 0; h < 2; ++h) {                                                                           \
      for (int q = 0; q < 2; ++q) {                                                                         \
        asm volatile("mma.sync.aligned.m8n8k16.row.col." TYPES " {%0, %1}, {%2}, {%3}, {%0, %1};\n"        \
                     : "+r"(d[2 * h]), "+r"(d[2 * h + 1])                                                   \
                     : "r"(TILE_MMA_U32(a, h + 2 * q)), "r"(TILE_MMA_U32(b, q)));                           \
      }                                                                                                     \
    }                                                                                                       \
  }
TILE_MMA_M8N8K16(tile_mma_m16n8k32_s8_s32, "s32.s8.s8.s32")
TILE_MMA_M8N8K16(tile_mma_m16n8k32_u8_s32, "s32.u8.u8.s32")
#undef TILE_MMA_M8N8K16

#else
// m16n8k16, f16 x f16 -> f32. a: 8 halves (4 regs), b: 4 halves (2 regs), d: 4 floats.
TILE_MMA_M16N8(tile_mma_m16n8k16_f16_f32, "m16n8k16.row.col.f32.f16.f16.f32", float, "+f")

// m16n8k16, f16 x f16 -> f16. d: 4 halves (2 regs, c0c1 then c2c3).
static __device__ __forceinline__ void tile_mma_m16n8k16_f16_f16(void* d, const void* a, const void* b) {
  unsigned int* dr = reinterpret_cast<unsigned int*>(d);
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(dr[0]), "+r"(dr[1])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// m16n8k32, s8 x s8 -> s32. a: 16 bytes (4 regs), b: 8 bytes (2 regs), d: 4 ints.
TILE_MMA_M16N8(tile_mma_m16n8k32_s8_s32, "m16n8k32.row.col.s32.s8.s8.s32", int, "+r")

// m16n8k32, u8 x u8 -> s32.
TILE_MMA_M16N8(tile_mma_m16n8k32_u8_s32, "m16n8k32.row.col.s32.u8.u8.s32", int, "+r")
#endif

// m16n8k16, bf16 x bf16 -> f32 (same fragment shapes as f16; sm_80+: T.gemm never issues it on sm_75).
TILE_MMA_M16N8(tile_mma_m16n8k16_bf16_f32, "m16n8k16.row.col.f32.bf16.bf16.f32", float, "+f")

// m16n8k32, e4m3 x e4m3 -> f32 (sm_89+).
TILE_MMA_M16N8(tile_mma_m16n8k32_e4m3_f32, "m16n8k32.row.col.f32.e4m3.e4m3.f32", float, "+f")

// m16n8k32, e5m2 x e5m2 -> f32 (sm_89+).
TILE_MMA_M16N8(tile_mma_m16n8k32_e5m2_f32, "m16n8k32.row.col.f32.e5m2.e5m2.f32", float, "+f")

// m16n8k8, tf32 x tf32 -> f32. a: 4 floats (a0..a3, the row half alternates first),
// b: 2 floats, d: 4 floats. The instruction reads the top 19 bits of each float;
// round first with tile_to_tf32 for round-to-nearest instead of truncation.
TILE_MMA_M16N8(tile_mma_m16n8k8_tf32_f32, "m16n8k8.row.col.f32.tf32.tf32.f32", float, "+f")

#undef TILE_MMA_M16N8

// m16n8k4, f64 x f64 -> f64 (DMMA): two mma.m8n8k4 f64, rows 0-7 and rows 8-15 of the
// m16n8 accumulator. a: 2 doubles (a0 row g, a1 row g + 8; column t), b: 1 double
// (k = t, n = g), d: 4 doubles (c0 c1 from the first, c2 c3 from the second).
static __device__ __forceinline__ void tile_mma_m16n8k4_f64(double* d, const void* a, const void* b) {
  const double* av = reinterpret_cast<const double*>(a);
  const double bv = *reinterpret_cast<const double*>(b);
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(av[0]), "d"(bv));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(d[2]), "+d"(d[3])
               : "d"(av[1]), "d"(bv));
}

// float -> tf32 (round to nearest, ties away from zero), kept in a float's bits.
static __device__ __forceinline__ float tile_to_tf32(float x) {
  unsigned int bits;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
}

#undef TILE_MMA_U32
