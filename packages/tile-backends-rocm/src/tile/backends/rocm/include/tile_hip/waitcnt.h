// tile_hip/waitcnt.h: tile::wait_vmem<N>(), s_waitcnt vmcnt(N) on gfx9 (gfx90a, gfx942).
//
// Waits until at most N vector-memory operations of the wave are outstanding. Loads complete
// in issue order, so it is cp.async.wait_group for a ring whose groups are counted in
// instructions: the LDS DMA loads of tile::lds_dma_dword (tile_hip/async.h) are among them.
//
// Encoding (the s_waitcnt SIMM16 of gfx9; LLVM AMDGPUBaseInfo.cpp getVmcntBitShiftLo/Hi,
// getExpcntBitShift, getLgkmcntBitShift, and the "vmcnt(N)" the gfx90a disassembly prints):
//   bits 3:0  vmcnt[3:0]     bits 6:4  expcnt (7: no wait)
//   bits 11:8 lgkmcnt (15: no wait)     bits 15:14 vmcnt[5:4]
// so vmcnt(N) alone is (N & 15) | 0x70 | 0xF00 | ((N >> 4) << 14). gfx10+ encode it otherwise.
#pragma once

namespace tile {

template <int N>
TILE_DEVICE void wait_vmem() {
  static_assert(N >= 0 && N < 64, "gfx9 vmcnt is 6 bits");
  __builtin_amdgcn_s_waitcnt((N & 15) | 0x70 | 0xF00 | ((N >> 4) << 14));
}

}  // namespace tile
