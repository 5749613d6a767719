// tile_cuda/ldmatrix.h: warp-level 8x8 matrix loads (ldmatrix, sm_75+) and stores
// (stmatrix, sm_90+), .b16 elements.
//
// `row` is this lane's row address: lane L (< 8 * num) gives row L % 8 of matrix
// L / 8; every row is 16 bytes, 16-byte aligned, in shared memory (a generic
// pointer into shared memory; it is converted here). Lanes past 8 * num pass any
// valid shared address (their own row again is fine).
// `regs` are 32-bit registers: register q receives matrix q. Without .trans lane l
// gets row l / 4, columns 2(l % 4) and 2(l % 4) + 1 (lower column in the low half);
// with .trans it gets column l / 4, rows 2(l % 4) and 2(l % 4) + 1.
// These are tile.layout.hardware.ldmatrix_fragment(num, trans): local 2q + h is
// half h of register q, so an array of 2 * num halves in local order is passed as is.
#pragma once

static __device__ __forceinline__ unsigned int tile_smem_addr(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

// Each register count (x1, x2, x4) comes plain and .trans; OPERANDS is the PTX operand list
// and the variadic part the asm operands of the registers.
#define TILE_LDMATRIX_ONE(NAME, FORM, OPERANDS, ...)                                                  \
  static __device__ __forceinline__ void NAME(void* regs, const void* row) {                         \
    unsigned int* r = reinterpret_cast<unsigned int*>(regs);                                         \
    asm volatile("ldmatrix.sync.aligned.m8n8." FORM ".shared.b16 " OPERANDS ";\n"                    \
                 : __VA_ARGS__ : "r"(tile_smem_addr(row)) : "memory");                                \
  }
#define TILE_LDMATRIX(NUM, OPERANDS, ...)                                                             \
  TILE_LDMATRIX_ONE(tile_ldmatrix_##NUM, #NUM, OPERANDS, __VA_ARGS__)                                 \
  TILE_LDMATRIX_ONE(tile_ldmatrix_##NUM##_trans, #NUM ".trans", OPERANDS, __VA_ARGS__)

TILE_LDMATRIX(x1, "{%0}, [%1]", "=r"(r[0]))
TILE_LDMATRIX(x2, "{%0, %1}, [%2]", "=r"(r[0]), "=r"(r[1]))
TILE_LDMATRIX(x4, "{%0, %1, %2, %3}, [%4]", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]))

// stmatrix (sm_90+): the same lane <-> (matrix, row, column) map, storing.
#define TILE_STMATRIX_ONE(NAME, FORM, OPERANDS, ...)                                                  \
  static __device__ __forceinline__ void NAME(void* row, const void* regs) {                         \
    const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);                             \
    asm volatile("stmatrix.sync.aligned.m8n8." FORM ".shared.b16 " OPERANDS ";\n"                    \
                 :: "r"(tile_smem_addr(row)), __VA_ARGS__ : "memory");                                \
  }
#define TILE_STMATRIX(NUM, OPERANDS, ...)                                                             \
  TILE_STMATRIX_ONE(tile_stmatrix_##NUM, #NUM, OPERANDS, __VA_ARGS__)                                 \
  TILE_STMATRIX_ONE(tile_stmatrix_##NUM##_trans, #NUM ".trans", OPERANDS, __VA_ARGS__)

TILE_STMATRIX(x1, "[%0], {%1}", "r"(r[0]))
TILE_STMATRIX(x2, "[%0], {%1, %2}", "r"(r[0]), "r"(r[1]))
TILE_STMATRIX(x4, "[%0], {%1, %2, %3, %4}", "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]))

#undef TILE_LDMATRIX_ONE
#undef TILE_LDMATRIX
#undef TILE_STMATRIX_ONE
#undef TILE_STMATRIX
