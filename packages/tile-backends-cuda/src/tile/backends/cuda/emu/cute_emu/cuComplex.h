// Host stand-in (TILE_DEVICE=emu, T.gemm impl="cute" only): cutlass/complex.h converts from
// and to CUDA's complex types; the gemm never uses them.
#pragma once
#include "cuda_runtime.h"

typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
inline float cuCrealf(cuFloatComplex z) { return z.x; }
inline float cuCimagf(cuFloatComplex z) { return z.y; }
inline double cuCreal(cuDoubleComplex z) { return z.x; }
inline double cuCimag(cuDoubleComplex z) { return z.y; }
inline cuFloatComplex make_cuFloatComplex(float r, float i) {
  cuFloatComplex z;
  z.x = r;
  z.y = i;
  return z;
}
inline cuDoubleComplex make_cuDoubleComplex(double r, double i) {
  cuDoubleComplex z;
  z.x = r;
  z.y = i;
  return z;
}
