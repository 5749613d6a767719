// tile_cuda/mma.h: warp-level tensor-core instructions (mma.sync), sm_80+.
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

// m16n8k16, f16 x f16 -> f32. a: 8 halves (4 regs), b: 4 halves (2 regs), d: 4 floats.
static __device__ __forceinline__ void tile_mma_m16n8k16_f16_f32(float* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// m16n8k16, bf16 x bf16 -> f32 (same fragment shapes as f16).
static __device__ __forceinline__ void tile_mma_m16n8k16_bf16_f32(float* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

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
static __device__ __forceinline__ void tile_mma_m16n8k32_s8_s32(int* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// m16n8k32, u8 x u8 -> s32.
static __device__ __forceinline__ void tile_mma_m16n8k32_u8_s32(int* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// m16n8k32, e4m3 x e4m3 -> f32 (sm_89+).
static __device__ __forceinline__ void tile_mma_m16n8k32_e4m3_f32(float* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// m16n8k32, e5m2 x e5m2 -> f32 (sm_89+).
static __device__ __forceinline__ void tile_mma_m16n8k32_e5m2_f32(float* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// m16n8k8, tf32 x tf32 -> f32. a: 4 floats (a0..a3, the row half alternates first),
// b: 2 floats, d: 4 floats. The instruction reads the top 19 bits of each float;
// round first with tile_to_tf32 for round-to-nearest instead of truncation.
static __device__ __forceinline__ void tile_mma_m16n8k8_tf32_f32(float* d, const void* a, const void* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(TILE_MMA_U32(a, 0)), "r"(TILE_MMA_U32(a, 1)), "r"(TILE_MMA_U32(a, 2)), "r"(TILE_MMA_U32(a, 3)),
        "r"(TILE_MMA_U32(b, 0)), "r"(TILE_MMA_U32(b, 1)));
}

// float -> tf32 (round to nearest, ties away from zero), kept in a float's bits.
static __device__ __forceinline__ float tile_to_tf32(float x) {
  unsigned int bits;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
}

#undef TILE_MMA_U32
