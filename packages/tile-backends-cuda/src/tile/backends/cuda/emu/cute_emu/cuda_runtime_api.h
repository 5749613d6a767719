// Host stand-in (TILE_DEVICE=emu, T.gemm impl="cute" only): CUTLASS includes the CUDA runtime
// API header; the emulator's cuda_runtime.h provides the dialect. CUTLASS's half_t and
// bfloat16_t convert through __half_raw / __nv_bfloat16_raw on the host, which the emulator's
// 16-bit types lack: these are their 2-byte bit images.
#pragma once
#include <string.h>

#include "cuda_runtime.h"

// The bit image of a 2-byte emulated float type Value.
template <typename Value>
struct tile_raw16 {
  unsigned short x;
  tile_raw16() = default;
  tile_raw16(const Value& v) { memcpy(&x, &v, 2); }
  operator Value() const {
    Value v;
    memcpy(&v, &x, 2);
    return v;
  }
};
typedef tile_raw16<__half> __half_raw;
typedef tile_raw16<__nv_bfloat16> __nv_bfloat16_raw;
