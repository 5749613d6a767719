// tile_simt_dialect.h: the GPU C++ dialect on the host, for kernels run by the SIMT emulator.
//
// CUDA's spelling of GPU C++, which HIP shares for kernel bodies: this header maps what
// generated sources and the vendors' emulation headers use onto host C++ and the
// emulator's runtime (tile_simt.h): execution-space keywords, __shared__ storage,
// thread/block ids, half/bfloat16/fp8 with round-to-nearest-even conversions, vector
// types, math intrinsics, atomics, barriers, shuffles and votes. It names no vendor
// instruction: a vendor's emulated device header (registered with
// tile.backends.cpu.simt.register_device, e.g. tile-backends-cuda's tile_cuda.h and its
// cuda.h/cuda_fp16.h shims) includes it and adds the vendor's own entry points.
//
// __shared__ is thread_local: every fiber of a block runs on one OS thread, so one copy
// per OS thread is one copy per block.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tile_simt.h"

// ------------------------------------------------------------------ keywords
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ thread_local
#define __constant__
#define __managed__
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
// Other fibers change memory between a thread's accesses; promise nothing about aliasing.
#define __restrict__
// CUDA sources write `__shared__ alignas(64) float x[n];`: with __shared__ as thread_local
// the standard attribute would sit among the decl-specifiers, which C++ forbids; the GNU
// attribute may. (Standard headers are included above, before this spelling applies.)
#define alignas(n) __attribute__((aligned(n)))

// Compiler barrier around every point where another fiber may run.
#define TILE_SIMT_FENCE() asm volatile("" ::: "memory")

// ------------------------------------------------------------------ warp collectives
// How every emulated collective instruction (the dialect's and each vendor's) reaches the
// runtime: the lane's operands in a tile_simt_args, fenced on both sides because other
// fibers run, and read or write this lane's memory, while it waits.
namespace tile_simt_dialect {

inline uint64_t collective(int kind, unsigned long long mask, tile_simt_args* args, int line) {
  TILE_SIMT_FENCE();
  const uint64_t out = tile_simt_collective(kind, mask, args, line);
  TILE_SIMT_FENCE();
  return out;
}

inline uint64_t warp_call(tile_simt_compute_fn compute, const char* name, unsigned long long mask,
                          tile_simt_args* args, int line) {
  TILE_SIMT_FENCE();
  const uint64_t out = tile_simt_warp_call(compute, name, mask, args, line);
  TILE_SIMT_FENCE();
  return out;
}

// A shuffle of value's bits among the lanes of mask (TILE_SIMT_SHFL: mode 0 idx, 1 up,
// 2 down, 3 bfly; b and c as PTX's shfl.sync operands, which each vendor derives from its
// own width argument).
template <typename T>
inline T shuffle_bits(int mode, unsigned long long mask, T value, int b, int c, int line) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 64 bits");
  tile_simt_args args{};
  memcpy(&args.v0, &value, sizeof(T));
  args.i0 = mode;
  args.i1 = b;
  args.i2 = c;
  const uint64_t bits = collective(TILE_SIMT_SHFL, mask, &args, line);
  T out;
  memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace tile_simt_dialect

// ------------------------------------------------------------------ thread and block ids
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  dim3(const tile_simt_dim3& d) : x(d.x), y(d.y), z(d.z) {}
};
#define threadIdx (tile_simt_self->thread_idx)
#define blockIdx (tile_simt_self->block_idx)
#define blockDim (tile_simt_self->block_dim)
#define gridDim (tile_simt_self->grid_dim)
#define warpSize ((int)tile_simt_self->warp_size)

// ------------------------------------------------------------------ 16-bit and 8-bit floats
namespace tile_simt_fp {

inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

// float -> binary16, round to nearest even (overflow to infinity, NaN kept).
inline uint16_t float_to_half(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) return (uint16_t)(sign | (uint16_t)nearbyintf(float_of(a) * 16777216.0f));
  uint32_t r = ((a >> 23) - 112u) << 10 | ((a & 0x7fffffu) >> 13);
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) ++r;
  return (uint16_t)(sign | r);
}

inline float bf16_to_float(uint16_t h) { return float_of((uint32_t)h << 16); }

// float -> bfloat16, round to nearest even (NaN kept quiet).
inline uint16_t float_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// An 8-bit float with `mbits` mantissa bits and exponent bias `bias`; e4m3 has no
// infinities (its all-ones pattern is NaN), e5m2 is IEEE-like. Saturates to the
// largest finite value (the __NV_SATFINITE behaviour of the fp8 constructors).
inline float fp8_to_float(uint8_t b, int mbits, int bias, bool ieee) {
  const int ebits = 7 - mbits;
  const int e = (b >> mbits) & ((1 << ebits) - 1), m = b & ((1 << mbits) - 1);
  const float sign = (b & 0x80u) ? -1.0f : 1.0f;
  if (ieee && e == (1 << ebits) - 1) return m ? NAN : sign * INFINITY;
  if (!ieee && e == (1 << ebits) - 1 && m == (1 << mbits) - 1) return NAN;
  if (e == 0) return sign * ldexpf((float)m, 1 - bias - mbits);
  return sign * ldexpf((float)((1 << mbits) + m), e - bias - mbits);
}

inline uint8_t float_to_fp8(float f, int mbits, int bias, bool ieee) {
  const uint8_t sign = (bits_of(f) >> 24) & 0x80u;
  if (f != f) return (uint8_t)(sign | 0x7fu);
  const int ebits = 7 - mbits;
  const float max_finite = ieee ? ldexpf((float)((2 << mbits) - 1), (1 << ebits) - 2 - bias - mbits)
                                : ldexpf((float)((2 << mbits) - 2), (1 << ebits) - 1 - bias - mbits);
  float a = fabsf(f);
  if (a >= max_finite) return (uint8_t)(sign | (ieee ? (((1 << ebits) - 2) << mbits) | ((1 << mbits) - 1) : 0x7eu));
  int e;
  frexpf(a, &e);                                    // a = 0.f * 2^e, so the leading bit is 2^(e-1)
  int exp_field = e - 1 + bias;
  if (exp_field < 1) exp_field = 0;                 // subnormal: fixed scale
  const int scale = (exp_field == 0 ? 1 - bias : exp_field - bias) - mbits;
  float q = nearbyintf(ldexpf(a, -scale));          // round to nearest even in units of the last place
  if (exp_field == 0) {
    if (q >= (float)(1 << mbits)) return (uint8_t)(sign | (1 << mbits) | ((int)q - (1 << mbits)));
    return (uint8_t)(sign | (int)q);
  }
  if (q >= (float)(2 << mbits)) {                   // rounded up into the next binade
    q /= 2;
    ++exp_field;
  }
  return (uint8_t)(sign | (exp_field << mbits) | ((int)q - (1 << mbits)));
}

}  // namespace tile_simt_fp

// A 16-bit float held as its bits (__x, as in CUDA's types), converted through float.
template <uint16_t (*FromFloat)(float), float (*ToFloat)(uint16_t)>
struct tile_simt_float16 {
  uint16_t __x;
  tile_simt_float16() = default;
  tile_simt_float16(float f) : __x(FromFloat(f)) {}
  tile_simt_float16(double f) : __x(FromFloat((float)f)) {}
  tile_simt_float16(int v) : __x(FromFloat((float)v)) {}
  tile_simt_float16(unsigned v) : __x(FromFloat((float)v)) {}
  tile_simt_float16(long long v) : __x(FromFloat((float)v)) {}
  operator float() const { return ToFloat(__x); }
};

struct __half : tile_simt_float16<tile_simt_fp::float_to_half, tile_simt_fp::half_to_float> {
  using tile_simt_float16::tile_simt_float16;
  __half() = default;
  __half(long v) : __half((float)v) {}
  __half(unsigned long long v) : __half((float)v) {}
  __half(short v) : __half((float)v) {}
  __half(unsigned short v) : __half((float)v) {}
};
typedef __half half;

struct __nv_bfloat16 : tile_simt_float16<tile_simt_fp::float_to_bf16, tile_simt_fp::bf16_to_float> {
  using tile_simt_float16::tile_simt_float16;
  __nv_bfloat16() = default;
};
typedef __nv_bfloat16 nv_bfloat16;

struct __align__(4) __half2 {
  __half x, y;
  __half2() = default;
  __half2(__half a, __half b) : x(a), y(b) {}
};
typedef __half2 half2;
struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};
typedef __nv_bfloat162 nv_bfloat162;

#define TILE_SIMT_HALF_OPS(T)                                                                     \
  inline T operator+(T a, T b) { return T((float)a + (float)b); }                                \
  inline T operator-(T a, T b) { return T((float)a - (float)b); }                                \
  inline T operator*(T a, T b) { return T((float)a * (float)b); }                                \
  inline T operator/(T a, T b) { return T((float)a / (float)b); }                                \
  inline T operator-(T a) { T r = a; r.__x ^= 0x8000u; return r; }                               \
  inline T& operator+=(T& a, T b) { return a = a + b; }                                          \
  inline T& operator-=(T& a, T b) { return a = a - b; }                                          \
  inline T& operator*=(T& a, T b) { return a = a * b; }                                          \
  inline T& operator/=(T& a, T b) { return a = a / b; }                                          \
  inline bool operator<(T a, T b) { return (float)a < (float)b; }                                \
  inline bool operator>(T a, T b) { return (float)a > (float)b; }                                \
  inline bool operator<=(T a, T b) { return (float)a <= (float)b; }                              \
  inline bool operator>=(T a, T b) { return (float)a >= (float)b; }                              \
  inline bool operator==(T a, T b) { return (float)a == (float)b; }                              \
  inline bool operator!=(T a, T b) { return (float)a != (float)b; }
TILE_SIMT_HALF_OPS(__half)
TILE_SIMT_HALF_OPS(__nv_bfloat16)
#undef TILE_SIMT_HALF_OPS

inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double f) { return __half(f); }
inline __half __int2half_rn(int v) { return __half(v); }
inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
inline float __low2float(__half2 h) { return (float)h.x; }
inline float __high2float(__half2 h) { return (float)h.y; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline short __half_as_short(__half h) { return (short)h.__x; }
inline __half __ushort_as_half(unsigned short v) { __half h; h.__x = v; return h; }
inline __half __short_as_half(short v) { __half h; h.__x = (uint16_t)v; return h; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short v) { __nv_bfloat16 h; h.__x = v; return h; }

#define TILE_SIMT_HALF_FUNCS(T, P)                                                    \
  inline T P##add(T a, T b) { return a + b; }                                          \
  inline T P##sub(T a, T b) { return a - b; }                                          \
  inline T P##mul(T a, T b) { return a * b; }                                          \
  inline T P##div(T a, T b) { return a / b; }                                          \
  inline T P##neg(T a) { return -a; }                                                  \
  inline T P##fma(T a, T b, T c) { return T(fmaf((float)a, (float)b, (float)c)); }    \
  inline T P##max(T a, T b) { return (float)a >= (float)b ? a : b; }                   \
  inline T P##min(T a, T b) { return (float)a <= (float)b ? a : b; }                   \
  inline bool P##gt(T a, T b) { return (float)a > (float)b; }                          \
  inline bool P##lt(T a, T b) { return (float)a < (float)b; }                          \
  inline bool P##ge(T a, T b) { return (float)a >= (float)b; }                         \
  inline bool P##le(T a, T b) { return (float)a <= (float)b; }                         \
  inline bool P##eq(T a, T b) { return (float)a == (float)b; }                         \
  inline bool P##ne(T a, T b) { return (float)a != (float)b; }
TILE_SIMT_HALF_FUNCS(__half, __h)
TILE_SIMT_HALF_FUNCS(__nv_bfloat16, __h)  // cuda_bf16.h overloads the same names for bfloat16
#undef TILE_SIMT_HALF_FUNCS
inline __half __habs(__half a) { a.__x &= 0x7fffu; return a; }
inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
inline bool __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u; }
inline __half hexp(__half a) { return __half(expf((float)a)); }
inline __half hexp2(__half a) { return __half(exp2f((float)a)); }
inline __half hlog(__half a) { return __half(logf((float)a)); }
inline __half hlog2(__half a) { return __half(log2f((float)a)); }
inline __half hsqrt(__half a) { return __half(sqrtf((float)a)); }
inline __half hrsqrt(__half a) { return __half(1.0f / sqrtf((float)a)); }
inline __half hrcp(__half a) { return __half(1.0f / (float)a); }
inline __half hsin(__half a) { return __half(sinf((float)a)); }
inline __half hcos(__half a) { return __half(cosf((float)a)); }
inline __half htanh(__half a) { return __half(tanhf((float)a)); }
inline __half hfloor(__half a) { return __half(floorf((float)a)); }
inline __half hceil(__half a) { return __half(ceilf((float)a)); }
inline __half htrunc(__half a) { return __half(truncf((float)a)); }
inline __nv_bfloat16 __habs(__nv_bfloat16 a) { a.__x &= 0x7fffu; return a; }
inline bool __hisnan(__nv_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
inline bool __hisinf(__nv_bfloat16 a) { return (a.__x & 0x7fffu) == 0x7f80u; }
// (htanh, hpow, htan, hatan, herf for bfloat16 come from TVM's preamble of the generated source)
#define TILE_SIMT_BF16_UNARY(NAME, F) \
  inline __nv_bfloat16 NAME(__nv_bfloat16 a) { return __nv_bfloat16(F((float)a)); }
TILE_SIMT_BF16_UNARY(hexp, expf)
TILE_SIMT_BF16_UNARY(hexp2, exp2f)
TILE_SIMT_BF16_UNARY(hlog, logf)
TILE_SIMT_BF16_UNARY(hlog2, log2f)
TILE_SIMT_BF16_UNARY(hsqrt, sqrtf)
TILE_SIMT_BF16_UNARY(hsin, sinf)
TILE_SIMT_BF16_UNARY(hcos, cosf)
TILE_SIMT_BF16_UNARY(hfloor, floorf)
TILE_SIMT_BF16_UNARY(hceil, ceilf)
TILE_SIMT_BF16_UNARY(htrunc, truncf)
#undef TILE_SIMT_BF16_UNARY
inline __nv_bfloat16 hrsqrt(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / sqrtf((float)a)); }
inline __nv_bfloat16 hrcp(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / (float)a); }
// Paired types: constructors and lane-wise arithmetic (cuda_fp16.h / cuda_bf16.h).
inline __half2 make_half2(__half x, __half y) { return __half2(x, y); }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) { return __nv_bfloat162(x, y); }
#define TILE_SIMT_PAIR_OPS(P, E)                                                                         \
  inline P __hadd2(P a, P b) { return P(E((float)a.x + (float)b.x), E((float)a.y + (float)b.y)); }       \
  inline P __hsub2(P a, P b) { return P(E((float)a.x - (float)b.x), E((float)a.y - (float)b.y)); }       \
  inline P __hmul2(P a, P b) { return P(E((float)a.x * (float)b.x), E((float)a.y * (float)b.y)); }       \
  inline P __hfma2(P a, P b, P c) {                                                                       \
    return P(E(fmaf((float)a.x, (float)b.x, (float)c.x)), E(fmaf((float)a.y, (float)b.y, (float)c.y)));   \
  }                                                                                                       \
  inline P __hmax2(P a, P b) { return P(__hmax(a.x, b.x), __hmax(a.y, b.y)); }                            \
  inline P __hmin2(P a, P b) { return P(__hmin(a.x, b.x), __hmin(a.y, b.y)); }                            \
  inline P operator+(P a, P b) { return __hadd2(a, b); }                                                  \
  inline P operator-(P a, P b) { return __hsub2(a, b); }                                                  \
  inline P operator*(P a, P b) { return __hmul2(a, b); }                                                  \
  inline P& operator+=(P& a, P b) { return a = __hadd2(a, b); }                                           \
  inline P& operator*=(P& a, P b) { return a = __hmul2(a, b); }
TILE_SIMT_PAIR_OPS(__half2, __half)
TILE_SIMT_PAIR_OPS(__nv_bfloat162, __nv_bfloat16)
#undef TILE_SIMT_PAIR_OPS

inline __nv_bfloat16 __float2bfloat16_rz(float f) {
  __nv_bfloat16 h;
  h.__x = (uint16_t)(tile_simt_fp::bits_of(f) >> 16);  // truncation toward zero
  return h;
}
inline float __low2float(__nv_bfloat162 h) { return (float)h.x; }
inline float __high2float(__nv_bfloat162 h) { return (float)h.y; }

// OCP fp8 with MBITS mantissa bits and exponent bias BIAS; IEEE: e5m2's infinities and NaNs
// (e4m3 has no infinity and one NaN pattern).
template <int MBITS, int BIAS, bool IEEE>
struct tile_simt_fp8 {
  uint8_t __x;
  tile_simt_fp8() = default;
  explicit tile_simt_fp8(float f) : __x(tile_simt_fp::float_to_fp8(f, MBITS, BIAS, IEEE)) {}
  explicit tile_simt_fp8(double f) : tile_simt_fp8((float)f) {}
  explicit tile_simt_fp8(__half h) : tile_simt_fp8((float)h) {}
  explicit tile_simt_fp8(__nv_bfloat16 h) : tile_simt_fp8((float)h) {}
  explicit operator float() const { return tile_simt_fp::fp8_to_float(__x, MBITS, BIAS, IEEE); }
  explicit operator __half() const { return __half((float)*this); }
};
// Structs, not typedefs: CUDA's own headers (CCCL) declare `struct __nv_fp8_e4m3;`.
struct __nv_fp8_e4m3 : tile_simt_fp8<3, 7, false> {
  using tile_simt_fp8::tile_simt_fp8;
  __nv_fp8_e4m3() = default;
};
struct __nv_fp8_e5m2 : tile_simt_fp8<2, 15, true> {
  using tile_simt_fp8::tile_simt_fp8;
  __nv_fp8_e5m2() = default;
};
struct __align__(2) __nv_fp8x2_e4m3 { uint16_t __x; };
struct __align__(4) __nv_fp8x4_e4m3 { uint32_t __x; };
struct __align__(2) __nv_fp8x2_e5m2 { uint16_t __x; };
struct __align__(4) __nv_fp8x4_e5m2 { uint32_t __x; };

// ------------------------------------------------------------------ vector types
#define TILE_SIMT_VEC1(N, T, A) struct __align__(A) N##1 { T x; };
#define TILE_SIMT_VEC2(N, T, A) struct __align__(A) N##2 { T x, y; };
#define TILE_SIMT_VEC3(N, T, A) struct N##3 { T x, y, z; };
#define TILE_SIMT_VEC4(N, T, A) struct __align__(A) N##4 { T x, y, z, w; };
#define TILE_SIMT_VECS(N, T, A1, A2, A4)                                                                   \
  TILE_SIMT_VEC1(N, T, A1) TILE_SIMT_VEC2(N, T, A2) TILE_SIMT_VEC3(N, T, A1) TILE_SIMT_VEC4(N, T, A4)     \
  inline N##1 make_##N##1(T x) { return {x}; }                                                             \
  inline N##2 make_##N##2(T x, T y) { return {x, y}; }                                                     \
  inline N##3 make_##N##3(T x, T y, T z) { return {x, y, z}; }                                             \
  inline N##4 make_##N##4(T x, T y, T z, T w) { return {x, y, z, w}; }
TILE_SIMT_VECS(char, signed char, 1, 2, 4)
TILE_SIMT_VECS(uchar, unsigned char, 1, 2, 4)
TILE_SIMT_VECS(short, short, 2, 4, 8)
TILE_SIMT_VECS(ushort, unsigned short, 2, 4, 8)
TILE_SIMT_VECS(int, int, 4, 8, 16)
TILE_SIMT_VECS(uint, unsigned int, 4, 8, 16)
TILE_SIMT_VECS(long, long, 8, 16, 16)
TILE_SIMT_VECS(ulong, unsigned long, 8, 16, 16)
TILE_SIMT_VECS(longlong, long long, 8, 16, 16)
TILE_SIMT_VECS(ulonglong, unsigned long long, 8, 16, 16)
TILE_SIMT_VECS(float, float, 4, 8, 16)
TILE_SIMT_VECS(double, double, 8, 16, 16)
#undef TILE_SIMT_VEC1
#undef TILE_SIMT_VEC2
#undef TILE_SIMT_VEC3
#undef TILE_SIMT_VEC4
#undef TILE_SIMT_VECS

// ------------------------------------------------------------------ math
#define CUDART_INF_F __builtin_inff()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_inf()
#define CUDART_NAN __builtin_nan("")
#define CUDART_PI_F 3.141592654f

#define TILE_SIMT_MINMAX(T)                                  \
  inline T max(T a, T b) { return a > b ? a : b; }           \
  inline T min(T a, T b) { return a < b ? a : b; }
TILE_SIMT_MINMAX(int)
TILE_SIMT_MINMAX(unsigned int)
TILE_SIMT_MINMAX(long)
TILE_SIMT_MINMAX(unsigned long)
TILE_SIMT_MINMAX(long long)
TILE_SIMT_MINMAX(unsigned long long)
#undef TILE_SIMT_MINMAX
inline float max(float a, float b) { return fmaxf(a, b); }
inline float min(float a, float b) { return fminf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(double a, double b) { return fmin(a, b); }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float exp10f(float x) { return powf(10.0f, x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __int2float_rn(int v) { return (float)v; }
inline int __float2int_rn(float v) { return (int)nearbyintf(v); }
inline int __float2int_rz(float v) { return (int)v; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
inline float __uint_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned v; memcpy(&v, &f, 4); return v; }
inline double __longlong_as_double(long long v) { double f; memcpy(&f, &v, 8); return f; }
inline long long __double_as_longlong(double f) { long long v; memcpy(&v, &f, 8); return v; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
inline int __clzll(long long v) { return v ? __builtin_clzll((unsigned long long)v) : 64; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
// the offset-th set bit of mask from bit base (offset > 0: upwards, < 0: downwards, 0: base
// itself if set); 0xffffffff when there is none
inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  if (offset == 0) return (mask >> base) & 1u ? base : 0xffffffffu;
  const int step = offset > 0 ? 1 : -1;
  int left = offset > 0 ? offset : -offset;
  for (int pos = (int)base; pos >= 0 && pos < 32; pos += step)
    if ((mask >> pos) & 1u && --left == 0) return (unsigned)pos;
  return 0xffffffffu;
}
inline unsigned __brev(unsigned v) {
  v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
  v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
  v = ((v >> 4) & 0x0f0f0f0fu) | ((v & 0x0f0f0f0fu) << 4);
  v = ((v >> 8) & 0x00ff00ffu) | ((v & 0x00ff00ffu) << 8);
  return (v >> 16) | (v << 16);
}
// SIMD-within-a-word intrinsics (CUDA Math API, "SIMD Intrinsics"): independent 8- or 16-bit
// lanes of a 32-bit word, each lane wrapping around on its own.
template <int Bits, typename F>
inline unsigned tile_simt_lanes(unsigned a, unsigned b, F f) {
  const unsigned mask = (1u << Bits) - 1u;
  unsigned out = 0;
  for (int shift = 0; shift < 32; shift += Bits) {
    out |= ((unsigned)f((a >> shift) & mask, (b >> shift) & mask) & mask) << shift;
  }
  return out;
}
template <int Bits>
inline int tile_simt_lane_signed(unsigned v) {
  return (int)(v << (32 - Bits)) >> (32 - Bits);
}
inline unsigned __vadd2(unsigned a, unsigned b) { return tile_simt_lanes<16>(a, b, [](unsigned x, unsigned y) { return x + y; }); }
inline unsigned __vadd4(unsigned a, unsigned b) { return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) { return x + y; }); }
inline unsigned __vsub2(unsigned a, unsigned b) { return tile_simt_lanes<16>(a, b, [](unsigned x, unsigned y) { return x - y; }); }
inline unsigned __vsub4(unsigned a, unsigned b) { return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) { return x - y; }); }
inline unsigned __vabsdiffu4(unsigned a, unsigned b) {
  return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) { return x > y ? x - y : y - x; });
}
inline unsigned __vmaxu4(unsigned a, unsigned b) { return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) { return x > y ? x : y; }); }
inline unsigned __vminu4(unsigned a, unsigned b) { return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) { return x < y ? x : y; }); }
inline unsigned __vmaxs4(unsigned a, unsigned b) {
  return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) {
    return tile_simt_lane_signed<8>(x) > tile_simt_lane_signed<8>(y) ? x : y;
  });
}
inline unsigned __vmins4(unsigned a, unsigned b) {
  return tile_simt_lanes<8>(a, b, [](unsigned x, unsigned y) {
    return tile_simt_lane_signed<8>(x) < tile_simt_lane_signed<8>(y) ? x : y;
  });
}
// byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {y, x} (x the low word)
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long both = ((unsigned long long)y << 32) | x;
  unsigned out = 0;
  for (int i = 0; i < 4; ++i) out |= (unsigned)((both >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return out;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long both = ((unsigned long long)hi << 32) | lo;
  return (unsigned)((both << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long both = ((unsigned long long)hi << 32) | lo;
  return (unsigned)(both >> (shift & 31u));
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
template <typename T>
inline T __ldg(const T* p) { return *p; }
inline unsigned __cvta_generic_to_shared(const void* p) { return (unsigned)(uintptr_t)p; }

// ------------------------------------------------------------------ barriers and fences
inline void __syncthreads(int line = __builtin_LINE()) {
  TILE_SIMT_FENCE();
  tile_simt_syncthreads(line);
  TILE_SIMT_FENCE();
}
inline void __syncwarp(unsigned mask = 0xffffffffu, int line = __builtin_LINE()) {
  tile_simt_args args{};
  tile_simt_dialect::collective(TILE_SIMT_SYNCWARP, mask, &args, line);
}
inline void __threadfence_block() { TILE_SIMT_FENCE(); }
// CUDA documents the sleep as approximately ns nanoseconds, anywhere in [0, 2 * ns]: the
// emulator's threads take turns at barriers and collectives, so it sleeps 0.
inline void __nanosleep(unsigned /*ns*/) {}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ------------------------------------------------------------------ shuffles and votes
namespace tile_simt_dialect {

template <typename T>
inline T shuffle(int mode, unsigned mask, T value, int b, int width, int line) {
  const int c = ((32 - width) << 8) | (mode == 1 ? 0 : 0x1f);  // CUDA's c operand for width
  return shuffle_bits(mode, mask, value, b, c, line);
}

inline uint64_t vote(int mode, unsigned mask, int predicate, int line) {
  tile_simt_args args{};
  args.i0 = mode;
  args.i1 = predicate != 0;
  return collective(TILE_SIMT_VOTE, mask, &args, line);
}

}  // namespace tile_simt_dialect

template <typename T>
inline T __shfl_sync(unsigned mask, T value, int src_lane, int width = 32, int line = __builtin_LINE()) {
  return tile_simt_dialect::shuffle(0, mask, value, src_lane, width, line);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32, int line = __builtin_LINE()) {
  return tile_simt_dialect::shuffle(1, mask, value, (int)delta, width, line);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32, int line = __builtin_LINE()) {
  return tile_simt_dialect::shuffle(2, mask, value, (int)delta, width, line);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32, int line = __builtin_LINE()) {
  return tile_simt_dialect::shuffle(3, mask, value, lane_mask, width, line);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, int line = __builtin_LINE()) {
  return (unsigned)tile_simt_dialect::vote(0, mask, predicate, line);
}
inline int __any_sync(unsigned mask, int predicate, int line = __builtin_LINE()) {
  return (int)tile_simt_dialect::vote(1, mask, predicate, line);
}
inline int __all_sync(unsigned mask, int predicate, int line = __builtin_LINE()) {
  return (int)tile_simt_dialect::vote(2, mask, predicate, line);
}
inline int __uni_sync(unsigned mask, int predicate, int line = __builtin_LINE()) {
  return (int)tile_simt_dialect::vote(3, mask, predicate, line);
}
inline unsigned __activemask() {
  const unsigned first = tile_simt_self->warp * tile_simt_self->warp_size;
  const unsigned threads = tile_simt_self->block_dim.x * tile_simt_self->block_dim.y * tile_simt_self->block_dim.z;
  const unsigned present = threads - first < 32 ? threads - first : 32;
  return present >= 32 ? 0xffffffffu : ((1u << present) - 1);
}

// ------------------------------------------------------------------ atomics (blocks run in parallel)
namespace tile_simt_dialect {

template <typename T, typename Bits, typename F>
inline T atomic_update(T* address, F update) {
  static_assert(sizeof(T) == sizeof(Bits), "bit container size");
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits old_bits = __atomic_load_n(bits, __ATOMIC_RELAXED);
  for (;;) {
    T old_value;
    memcpy(&old_value, &old_bits, sizeof(T));
    const T new_value = update(old_value);
    Bits new_bits;
    memcpy(&new_bits, &new_value, sizeof(T));
    if (__atomic_compare_exchange_n(bits, &old_bits, new_bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return old_value;
  }
}

}  // namespace tile_simt_dialect

#define TILE_SIMT_INT_ATOMICS(T)                                                                          \
  inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }                   \
  inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }                   \
  inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }                   \
  inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }                     \
  inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }                   \
  inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }                 \
  inline T atomicMax(T* p, T v) {                                                                         \
    return tile_simt_dialect::atomic_update<T, T>(p, [v](T old) { return old > v ? old : v; });             \
  }                                                                                                       \
  inline T atomicMin(T* p, T v) {                                                                         \
    return tile_simt_dialect::atomic_update<T, T>(p, [v](T old) { return old < v ? old : v; });             \
  }                                                                                                       \
  inline T atomicCAS(T* p, T expected, T desired) {                                                       \
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
    return expected;                                                                                      \
  }
TILE_SIMT_INT_ATOMICS(int)
TILE_SIMT_INT_ATOMICS(unsigned int)
TILE_SIMT_INT_ATOMICS(long long)
TILE_SIMT_INT_ATOMICS(unsigned long long)
#undef TILE_SIMT_INT_ATOMICS
inline unsigned short atomicCAS(unsigned short* p, unsigned short expected, unsigned short desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
inline float atomicAdd(float* p, float v) {
  return tile_simt_dialect::atomic_update<float, uint32_t>(p, [v](float old) { return old + v; });
}
inline double atomicAdd(double* p, double v) {
  return tile_simt_dialect::atomic_update<double, uint64_t>(p, [v](double old) { return old + v; });
}
inline __half atomicAdd(__half* p, __half v) {
  return tile_simt_dialect::atomic_update<__half, uint16_t>(p, [v](__half old) { return old + v; });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
  return tile_simt_dialect::atomic_update<__nv_bfloat16, uint16_t>(p, [v](__nv_bfloat16 old) { return old + v; });
}
inline float atomicExch(float* p, float v) {
  return tile_simt_dialect::atomic_update<float, uint32_t>(p, [v](float) { return v; });
}
inline float atomicMax(float* p, float v) {
  return tile_simt_dialect::atomic_update<float, uint32_t>(p, [v](float old) { return old > v ? old : v; });
}
inline float atomicMin(float* p, float v) {
  return tile_simt_dialect::atomic_update<float, uint32_t>(p, [v](float old) { return old < v ? old : v; });
}

// T.device_assert: a failed assert faults the block; the report names the kernel's Python line.
namespace tile {
inline void device_trap(const char* report) { tile_simt_fault(TILE_SIMT_MISUSE, report, 0); }
// TILE_CHECK=1: the kernel statement the thread runs ("file.py:LINE"), named by its faults.
inline void kernel_line(const char* site) { tile_simt_kernel_line(site); }
}  // namespace tile
