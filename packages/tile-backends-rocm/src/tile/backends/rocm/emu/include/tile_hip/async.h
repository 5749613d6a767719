// tile_hip/async.h for the SIMT emulator: tile::lds_dma_dword, the ROCm backend's global -> LDS
// DMA (tile/backends/rocm/include/tile_hip/async.h; buffer_load_dword ... lds on gfx90a/gfx942).
//
// Lane l writes its dword to row + 4 * (l % 64), row = lds_base + lds_byte_offset, which the
// hardware takes from lane 0 (M0 through readfirstlane): a row that differs between the lanes of
// a wave is a fault (TILE_SIMT_MISUSE), so a lowering that gives lanes their own LDS addresses
// shows up here instead of silently filling the tile from lane 0's address only. A global offset
// at or past num_records reads 0 (the buffer's range check); an in-range offset that is not a
// multiple of 4 is a fault. The write is asynchronous, as on the device: the global dword is
// read at issue and lands in LDS only at the tile::wait_vmem<N>() that covers it
// (tile_hip/waitcnt.h; each DMA is one vmcnt op), never at a barrier, so a kernel that reads a
// stage before waiting for it reads what was there before.
#pragma once

namespace tile {

TILE_DEVICE void lds_dma_dword(void* lds_base, int lds_byte_offset, const void* global_base,
                               int global_byte_offset, unsigned num_records, int line = __builtin_LINE()) {
  unsigned char* row = (unsigned char*)lds_base + lds_byte_offset;
  const uint64_t mine = (uint64_t)(uintptr_t)row;
  const uint64_t first = wave_shuffle(0, mine, 0, TILE_WAVE_SIZE, line);
  if (mine != first) {
    tile_simt_fault(TILE_SIMT_MISUSE,
                    "tile::lds_dma_dword: the LDS row base differs between the lanes of a wave "
                    "(the hardware takes it from M0, one value per wave)",
                    line);
    return;
  }
  if (mine % 4 != 0) {
    tile_simt_fault(TILE_SIMT_MISUSE, "tile::lds_dma_dword: the LDS row base is not 4-byte aligned", line);
    return;
  }
  const unsigned offset = (unsigned)global_byte_offset;
  const unsigned char* source = (const unsigned char*)global_base;
  int bytes = 0;  // out of range: the buffer's range check reads 0
  if (offset < num_records && num_records - offset >= 4) {
    if (offset % 4 != 0) {
      tile_simt_fault(TILE_SIMT_MISUSE, "tile::lds_dma_dword: a global offset is not 4-byte aligned", line);
      return;
    }
    source += offset;
    bytes = 4;
  }
  // one vmcnt op = one cp.async group of the emulator's per-thread queue (read now, lands at a wait)
  tile_simt_cp_async(row + 4 * tile_simt_self->lane, bytes ? source : (const void*)row, 4, bytes);
  tile_simt_cp_async_commit();
}

}  // namespace tile
