// The PTX instructions that inline asm in T.import_source code may use, for the CPU emulator.
// tile.backends.cuda's inline_ptx.py rewrites each asm statement into calls of these; the
// semantics follow the PTX ISA (lop3: the immLut truth table over a, b, c with a = 0xF0,
// b = 0xCC, c = 0xAA; prmt: the default byte-permute mode; packed 16-bit floats: each half
// computed with one round-to-nearest-even).
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>

namespace tile_ptx {

template <class T> inline unsigned long long bits(const T& value) {
  static_assert(sizeof(T) <= 8, "inline PTX operands are at most 64 bits");
  unsigned long long out = 0;
  memcpy(&out, &value, sizeof(T));
  return out;
}

template <class T> inline void put(T& target, unsigned long long value) {
  static_assert(sizeof(T) <= 8, "inline PTX operands are at most 64 bits");
  memcpy(&target, &value, sizeof(T));
}

inline uint32_t mov(uint32_t a) { return a; }
inline uint32_t and_b32(uint32_t a, uint32_t b) { return a & b; }
inline uint32_t or_b32(uint32_t a, uint32_t b) { return a | b; }
inline uint32_t xor_b32(uint32_t a, uint32_t b) { return a ^ b; }
inline uint32_t not_b32(uint32_t a) { return ~a; }
// PTX clamps shift amounts: 32 or more shifts every bit out (the sign bit in for shr.s32)
inline uint32_t shl_b32(uint32_t a, uint32_t n) { return n >= 32 ? 0u : a << n; }
inline uint32_t shr_u32(uint32_t a, uint32_t n) { return n >= 32 ? 0u : a >> n; }
inline uint32_t shr_s32(uint32_t a, uint32_t n) {
  return (uint32_t)((int32_t)a >> (n >= 32 ? 31 : n));
}
inline uint32_t add_u32(uint32_t a, uint32_t b) { return a + b; }
inline uint32_t sub_u32(uint32_t a, uint32_t b) { return a - b; }
inline uint32_t mul_lo_u32(uint32_t a, uint32_t b) { return a * b; }

// Bit i of the result is bit ((a_i << 2) | (b_i << 1) | c_i) of the 8-bit lookup table.
inline uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut) {
  uint32_t out = 0;
  for (int k = 0; k < 8; ++k) {
    if (!((lut >> k) & 1u)) continue;
    out |= ((k & 4) ? a : ~a) & ((k & 2) ? b : ~b) & ((k & 1) ? c : ~c);
  }
  return out;
}

// Bytes 0-3 of a then 4-7 of b; selector nibble i picks result byte i, its bit 3 replicates
// the picked byte's sign bit instead.
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t c) {
  const uint64_t pool = (uint64_t)a | ((uint64_t)b << 32);
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t selector = (c >> (4 * i)) & 0xfu;
    uint32_t byte = (uint32_t)(pool >> (8 * (selector & 7u))) & 0xffu;
    if (selector & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    out |= byte << (8 * i);
  }
  return out;
}

// float -> float rounded to odd from a double: exact when it fits, else the float toward zero
// with its last bit set. A later round-to-nearest-even to 16 bits is then correctly rounded.
inline float round_to_odd(double value) {
  float f = (float)value;
  if ((double)f == value || value != value) return f;
  if (fabs((double)f) > fabs(value)) f = nextafterf(f, 0.0f);
  uint32_t u;
  memcpy(&u, &f, 4);
  u |= 1u;
  memcpy(&f, &u, 4);
  return f;
}

template <uint16_t (*From)(float), float (*To)(uint16_t)> struct packed16 {
  static float lo(uint32_t v) { return To((uint16_t)(v & 0xffffu)); }
  static float hi(uint32_t v) { return To((uint16_t)(v >> 16)); }
  static uint32_t pack(float lo_value, float hi_value) {
    return (uint32_t)From(lo_value) | ((uint32_t)From(hi_value) << 16);
  }
  // float holds every product and every sum of two such values closely enough: 24 bits >= 2p + 2
  // (p = 11 for float16, 8 for bfloat16), so one more rounding to 16 bits is the correct one.
  static uint32_t add(uint32_t a, uint32_t b) { return pack(lo(a) + lo(b), hi(a) + hi(b)); }
  static uint32_t sub(uint32_t a, uint32_t b) { return pack(lo(a) - lo(b), hi(a) - hi(b)); }
  static uint32_t mul(uint32_t a, uint32_t b) { return pack(lo(a) * lo(b), hi(a) * hi(b)); }
  static uint32_t fma(uint32_t a, uint32_t b, uint32_t c) {
    // the product is exact in double, the sum one rounding; round to odd keeps it single
    return pack(round_to_odd((double)lo(a) * lo(b) + lo(c)), round_to_odd((double)hi(a) * hi(b) + hi(c)));
  }
};

using f16x2 = packed16<tile_simt_fp::float_to_half, tile_simt_fp::half_to_float>;
using bf16x2 = packed16<tile_simt_fp::float_to_bf16, tile_simt_fp::bf16_to_float>;

inline uint32_t add_f16x2(uint32_t a, uint32_t b) { return f16x2::add(a, b); }
inline uint32_t sub_f16x2(uint32_t a, uint32_t b) { return f16x2::sub(a, b); }
inline uint32_t mul_f16x2(uint32_t a, uint32_t b) { return f16x2::mul(a, b); }
inline uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) { return f16x2::fma(a, b, c); }
inline uint32_t add_bf16x2(uint32_t a, uint32_t b) { return bf16x2::add(a, b); }
inline uint32_t sub_bf16x2(uint32_t a, uint32_t b) { return bf16x2::sub(a, b); }
inline uint32_t mul_bf16x2(uint32_t a, uint32_t b) { return bf16x2::mul(a, b); }
inline uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) { return bf16x2::fma(a, b, c); }

}  // namespace tile_ptx
