// AMD CDNA matrix-core instructions (v_mfma_*) as wave64 collectives of the SIMT emulator.
//
// Owned by the ROCm backend's emulation: the kinds, the per-lane argument record and the
// fragment layouts are defined here as that backend's device header (tile_hip.h for the
// emulator) needs them. Until a kind is defined every MFMA collective is refused with a
// MISUSE fault naming it, never computed wrongly.
#include <stdio.h>

#include "simt_internal.h"

namespace tile_simt {

int compute_mfma(tile_simt_args* lanes, unsigned long long mask, unsigned warp_size, char* error,
                 size_t error_size) {
  (void)lanes;
  (void)mask;
  snprintf(error, error_size, "MFMA kind %d is not implemented by this emulator (warp size %u)",
           lanes[0].i0, warp_size);
  return TILE_SIMT_MISUSE;
}

}  // namespace tile_simt
