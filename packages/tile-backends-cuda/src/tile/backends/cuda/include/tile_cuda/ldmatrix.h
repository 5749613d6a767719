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

static __device__ __forceinline__ void tile_ldmatrix_x1(void* regs, const void* row) {
  unsigned int* r = reinterpret_cast<unsigned int*>(regs);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(tile_smem_addr(row)) : "memory");
}

static __device__ __forceinline__ void tile_ldmatrix_x2(void* regs, const void* row) {
  unsigned int* r = reinterpret_cast<unsigned int*>(regs);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(tile_smem_addr(row)) : "memory");
}

static __device__ __forceinline__ void tile_ldmatrix_x4(void* regs, const void* row) {
  unsigned int* r = reinterpret_cast<unsigned int*>(regs);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tile_smem_addr(row)) : "memory");
}

static __device__ __forceinline__ void tile_ldmatrix_x1_trans(void* regs, const void* row) {
  unsigned int* r = reinterpret_cast<unsigned int*>(regs);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(tile_smem_addr(row)) : "memory");
}

static __device__ __forceinline__ void tile_ldmatrix_x2_trans(void* regs, const void* row) {
  unsigned int* r = reinterpret_cast<unsigned int*>(regs);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(tile_smem_addr(row)) : "memory");
}

static __device__ __forceinline__ void tile_ldmatrix_x4_trans(void* regs, const void* row) {
  unsigned int* r = reinterpret_cast<unsigned int*>(regs);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tile_smem_addr(row)) : "memory");
}

// stmatrix (sm_90+): the same lane <-> (matrix, row, column) map, storing.
static __device__ __forceinline__ void tile_stmatrix_x1(void* row, const void* regs) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n"
               :: "r"(tile_smem_addr(row)), "r"(r[0]) : "memory");
}

static __device__ __forceinline__ void tile_stmatrix_x2(void* row, const void* regs) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n"
               :: "r"(tile_smem_addr(row)), "r"(r[0]), "r"(r[1]) : "memory");
}

static __device__ __forceinline__ void tile_stmatrix_x4(void* row, const void* regs) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(tile_smem_addr(row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}

static __device__ __forceinline__ void tile_stmatrix_x1_trans(void* row, const void* regs) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n"
               :: "r"(tile_smem_addr(row)), "r"(r[0]) : "memory");
}

static __device__ __forceinline__ void tile_stmatrix_x2_trans(void* row, const void* regs) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n"
               :: "r"(tile_smem_addr(row)), "r"(r[0]), "r"(r[1]) : "memory");
}

static __device__ __forceinline__ void tile_stmatrix_x4_trans(void* row, const void* regs) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(regs);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(tile_smem_addr(row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
