// Host stand-in (TILE_DEVICE=emu, T.gemm impl="cute" only): CUTLASS includes the CUDA runtime
// API header; the emulator's cuda_runtime.h provides the dialect. CUTLASS's half_t and
// bfloat16_t convert through __half_raw / __nv_bfloat16_raw on the host, which the emulator's
// 16-bit types lack: these are their 2-byte bit images.
#pragma once
#include <string.h>

#include "cuda_runtime.h"

struct __half_raw {
  unsigned short x;
  __half_raw() = default;
  __half_raw(const __half& h) { memcpy(&x, &h, 2); }
  operator __half() const {
    __half h;
    memcpy(&h, &x, 2);
    return h;
  }
};

struct __nv_bfloat16_raw {
  unsigned short x;
  __nv_bfloat16_raw() = default;
  __nv_bfloat16_raw(const __nv_bfloat16& h) { memcpy(&x, &h, 2); }
  operator __nv_bfloat16() const {
    __nv_bfloat16 h;
    memcpy(&h, &x, 2);
    return h;
  }
};
