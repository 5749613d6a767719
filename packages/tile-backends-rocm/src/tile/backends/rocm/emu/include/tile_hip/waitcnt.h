// tile_hip/waitcnt.h for the SIMT emulator: tile::wait_vmem<N>(), the ROCm backend's
// s_waitcnt vmcnt(N) (tile/backends/rocm/include/tile_hip/waitcnt.h).
//
// Each tile::lds_dma_dword is one cp.async group of the issuing thread (tile_hip/async.h),
// so "at most N vector-memory ops in flight" is wait_group(N): every DMA write but the
// newest N lands now, in issue order. Other vector-memory ops are synchronous here, which
// is the weakest the device may be (on the device they also count, so the same N waits
// at least as long there).
#pragma once

namespace tile {

template <int N>
TILE_DEVICE void wait_vmem() {
  static_assert(N >= 0 && N < 64, "gfx9 vmcnt is 6 bits");
  tile_simt_cp_async_wait(N);
}

}  // namespace tile
