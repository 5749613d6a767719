// tile_hip/async.h: global -> LDS copies that bypass VGPRs ("LDS DMA", CDNA2 gfx90a / CDNA3 gfx942).
//
// One wrapper, tile::lds_dma_dword: each lane of a wave64 loads one dword from global memory
// through a buffer resource and the hardware writes it to LDS at M0 + 4 * lane
// (`buffer_load_dword vN, s[rsrc], 0 offen lds`). The LDS row base must be the same on every
// lane (it becomes M0 through readfirstlane); the SIMT emulator faults when it is not.
//
// Sources:
// * LLVM 15 IntrinsicsAMDGPU.td (llvm-15-dev 15.0.6, /usr/include/llvm-15/llvm/IR/), class
//   AMDGPURawBufferLoadLDS: llvm.amdgcn.raw.buffer.load.lds(v4i32 rsrc, i8 addrspace(3)* lds base,
//   i32 size (1/2/4, immediate), i32 voffset (VGPR, included in bounds checking), i32 soffset,
//   i32 imm offset, i32 aux (cache policy)). clang 15 has no builtin for it; binding a device
//   function to the intrinsic name with __asm is what Composable Kernel does
//   (ROCm/composable_kernel include/ck_tile/core/arch/amd_buffer_addressing.hpp,
//   llvm_amdgcn_raw_buffer_load_lds / amd_direct_load_global_to_lds).
// * V# word 3 = 0x00020000 on gfx90a and gfx94x: CK include/ck/ck.hpp, CK_BUFFER_RESOURCE_3RD_DWORD
//   (the same value for every gfx9 target; gfx10/11 use other values). Words 0-1 are the 48-bit base
//   address with stride 0, word 2 is num_records (bytes, for a raw buffer).
// * Out-of-range lanes read 0: CK's amd_direct_load_global_to_lds gives an invalid lane the offset
//   0x80000000 instead of branching around the load; Mojo's gpu.intrinsics.buffer_load_lds documents
//   "Reads with gds_offset > num_records return 0" (docs.modular.com). tile uses that for ragged
//   tails: the lowering turns an out-of-tensor element's offset into num_records.
// * LDS address M0 + inst_offset + 4 * lane: one dword per lane ("Direct loads require that each
//   thread reads and writes exactly a single DWORD", CK amd_direct_load_global_to_lds), with the
//   wave's M0 from lane 0 (readfirstlane); CK's callers pass lane-consecutive LDS offsets
//   (lds_offset = thread * elements) of which only the first lane's reaches M0, which fills the
//   tile only if lane l lands at M0 + 4 l. Not checked against the CDNA ISA guides' text.
#pragma once

typedef int tile_i32x4 __attribute__((ext_vector_type(4)));
typedef __attribute__((address_space(3))) void* tile_lds_ptr;

__device__ void tile_llvm_raw_buffer_load_lds(tile_i32x4 rsrc, tile_lds_ptr lds, int size, int voffset,
                                              int soffset, int offset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.lds");

#define TILE_BUFFER_RESOURCE_WORD3 0x00020000

namespace tile {

// A raw buffer over [base, base + num_records) bytes; every word is wave-uniform (SGPRs).
TILE_DEVICE tile_i32x4 buffer_resource(const void* base, unsigned num_records) {
  const unsigned long long address = (unsigned long long)base;
  tile_i32x4 rsrc;
  rsrc.x = __builtin_amdgcn_readfirstlane((int)(unsigned)address);
  rsrc.y = __builtin_amdgcn_readfirstlane((int)(unsigned)(address >> 32));
  rsrc.z = __builtin_amdgcn_readfirstlane((int)num_records);
  rsrc.w = TILE_BUFFER_RESOURCE_WORD3;
  return rsrc;
}

// Lane l of the wave: LDS bytes [row + 4 l, row + 4 l + 4) = global bytes [global_base +
// global_byte_offset, + 4), or 0 when global_byte_offset >= num_records; row = lds_base +
// lds_byte_offset, the same on every lane. The write lands asynchronously (vmcnt): the
// compiler waits for it before the __syncthreads that publishes the tile.
TILE_DEVICE void lds_dma_dword(void* lds_base, int lds_byte_offset, const void* global_base,
                               int global_byte_offset, unsigned num_records) {
  const tile_lds_ptr lds = (tile_lds_ptr)((char*)lds_base + lds_byte_offset);
  const int row = __builtin_amdgcn_readfirstlane((int)(unsigned)(unsigned long long)lds);
  tile_llvm_raw_buffer_load_lds(buffer_resource(global_base, num_records),
                                (tile_lds_ptr)(unsigned long long)(unsigned)row, 4, global_byte_offset, 0, 0, 0);
}

}  // namespace tile
