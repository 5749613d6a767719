// tile_gpu.h: the tile:: device entry points that read the same for every GPU vendor.
//
// tile.ir.gpu lowers copies, atomics, fast math and casts to tile:: calls for every vendor.
// Where the CUDA dialect spells one the same way for NVIDIA (nvcc, NVRTC) and AMD (HIP-Clang),
// it is defined here, once; each vendor's device header (tile_cuda.h of tile-backends-cuda,
// tile_hip.h of tile-backends-rocm) includes this file and adds what is its own. The vendor's
// header defines TILE_DEVICE and the 16-bit float types `half` and `tile_bf16` first.
// The folder is tile.ir.gpu.INCLUDE_DIR, which each vendor's compiler puts on its include path
// after the vendor's own. The CPU emulator (tile_simt_common.h of tile-backends-cpu) includes it
// too, for the fast math and casts; there TILE_SIMT_EMULATED is defined and the vector moves and
// atomics below are left to the emulator, which does them as host operations.
#pragma once

namespace tile {

#ifndef TILE_SIMT_EMULATED
// ---------------------------------------------------------------- vector loads and stores
// 128-bit and 64-bit moves; the address must be aligned to the width.
TILE_DEVICE void copy_128(void* dst, const void* src) { *(int4*)dst = *(const int4*)src; }
TILE_DEVICE void copy_64(void* dst, const void* src) { *(int2*)dst = *(const int2*)src; }
TILE_DEVICE void copy_32(void* dst, const void* src) { *(int*)dst = *(const int*)src; }

// ---------------------------------------------------------------- atomics
TILE_DEVICE float atomic_add(float* address, float value) { return atomicAdd(address, value); }
TILE_DEVICE double atomic_add(double* address, double value) { return atomicAdd(address, value); }
TILE_DEVICE int atomic_add(int* address, int value) { return atomicAdd(address, value); }
TILE_DEVICE unsigned atomic_add(unsigned* address, unsigned value) { return atomicAdd(address, value); }
// 64-bit integers as the generated code spells them (int64_t is long on LP64 hosts, which no
// atomicAdd overload takes): through the unsigned long long atomicAdd, the same bits.
TILE_DEVICE int64_t atomic_add(int64_t* address, int64_t value) {
  return (int64_t)atomicAdd((unsigned long long*)address, (unsigned long long)value);
}
TILE_DEVICE uint64_t atomic_add(uint64_t* address, uint64_t value) {
  return (uint64_t)atomicAdd((unsigned long long*)address, (unsigned long long)value);
}
TILE_DEVICE int atomic_max(int* address, int value) { return atomicMax(address, value); }
TILE_DEVICE int atomic_min(int* address, int value) { return atomicMin(address, value); }
TILE_DEVICE unsigned atomic_max(unsigned* address, unsigned value) { return atomicMax(address, value); }
TILE_DEVICE unsigned atomic_min(unsigned* address, unsigned value) { return atomicMin(address, value); }
// Floating-point max/min by compare-and-swap on the bit pattern (exact, NaN-free inputs).
// Replaces *address by value while value is better (larger for max, smaller for min).
template <bool Max>
TILE_DEVICE float atomic_float_extreme(float* address, float value) {
  int* bits = (int*)address;
  int old = *bits;
  while (Max ? __int_as_float(old) < value : __int_as_float(old) > value) {
    int seen = atomicCAS(bits, old, __float_as_int(value));
    if (seen == old) break;
    old = seen;
  }
  return __int_as_float(old);
}
TILE_DEVICE float atomic_max(float* address, float value) { return atomic_float_extreme<true>(address, value); }
TILE_DEVICE float atomic_min(float* address, float value) { return atomic_float_extreme<false>(address, value); }
#endif  // TILE_SIMT_EMULATED

// ---------------------------------------------------------------- bitwise atomics
// The same calls on every vendor and under the emulator, whose dialect has atomicAnd/Or/Xor.
#define TILE_BITWISE_ATOMICS(T)                                                   \
  TILE_DEVICE T atomic_and(T* address, T value) { return atomicAnd(address, value); } \
  TILE_DEVICE T atomic_or(T* address, T value) { return atomicOr(address, value); }   \
  TILE_DEVICE T atomic_xor(T* address, T value) { return atomicXor(address, value); }
TILE_BITWISE_ATOMICS(int)
TILE_BITWISE_ATOMICS(unsigned)
#undef TILE_BITWISE_ATOMICS

// ---------------------------------------------------------------- 4-bit element stores
// One nibble of a packed sub-byte tensor (float4_e2m1fn, int4, uint4: two codes per byte, the
// low nibble first) in global or shared memory, by compare-and-swap on the aligned 32-bit word
// holding the byte: a store to the other nibble of the byte, or to a neighbouring byte, by another
// thread at the same time is kept (a plain read-modify-write of the byte would lose one of them).
// The word lies within the allocation: tensors and shared tiles start 4-byte aligned.
TILE_DEVICE int atomic_store_nibble(unsigned char* byte, int high, int code) {
  unsigned* word = (unsigned*)((unsigned long long)byte & ~3ull);
  const unsigned shift = ((unsigned)(unsigned long long)byte & 3u) * 8u + (high ? 4u : 0u);
  const unsigned mask = 0xfu << shift, bits = ((unsigned)code & 0xfu) << shift;
  unsigned old = *word;
  for (;;) {
    const unsigned seen = atomicCAS(word, old, (old & ~mask) | bits);
    if (seen == old) return 0;
    old = seen;
  }
}

// ---------------------------------------------------------------- fast math (fast_rsqrt: the vendor's)
TILE_DEVICE float fast_exp(float x) { return __expf(x); }
TILE_DEVICE float fast_exp2(float x) { return exp2f(x); }
TILE_DEVICE float fast_log(float x) { return __logf(x); }
TILE_DEVICE float fast_div(float a, float b) { return __fdividef(a, b); }

// ---------------------------------------------------------------- conversions (to_half: the vendor's)
TILE_DEVICE float to_float(half x) { return __half2float(x); }
TILE_DEVICE float to_float(tile_bf16 x) { return __bfloat162float(x); }
TILE_DEVICE tile_bf16 to_bfloat16(float x) { return __float2bfloat16_rn(x); }

#ifndef TILE_SIMT_EMULATED
// ---------------------------------------------------------------- 16-bit float atomics
// By compare-and-swap on the aligned 32-bit word holding the element (every vendor has a 32-bit
// CAS; not every one a 16-bit CAS): the element becomes updated(element); returns the old one.
// An update that leaves the bits as they are writes nothing.
template <typename T, typename F>
TILE_DEVICE T atomic_16bit_update(T* address, F updated) {
  unsigned* word = (unsigned*)((unsigned long long)address & ~3ull);
  const unsigned shift = ((unsigned)(unsigned long long)address & 2u) * 8u;
  unsigned old = *word;
  for (;;) {
    const unsigned short old_bits = (unsigned short)(old >> shift);
    T current;
    memcpy(&current, &old_bits, 2);
    const T next = updated(current);
    unsigned short next_bits;
    memcpy(&next_bits, &next, 2);
    if (next_bits == old_bits) return current;
    const unsigned desired = (old & ~(0xffffu << shift)) | ((unsigned)next_bits << shift);
    const unsigned seen = atomicCAS(word, old, desired);
    if (seen == old) return current;
    old = seen;
  }
}
// Max/min: the element is replaced while value is better; a NaN on either side compares false,
// so NaN is skipped as T.reduce_max skips it.
template <bool Max, typename T>
TILE_DEVICE T atomic_16bit_extreme(T* address, T value) {
  const float wanted = to_float(value);
  return atomic_16bit_update(address, [=](T current) {
    const float have = to_float(current);
    return (Max ? have < wanted : have > wanted) ? value : current;
  });
}
TILE_DEVICE half atomic_max(half* address, half value) { return atomic_16bit_extreme<true>(address, value); }
TILE_DEVICE half atomic_min(half* address, half value) { return atomic_16bit_extreme<false>(address, value); }
TILE_DEVICE tile_bf16 atomic_max(tile_bf16* address, tile_bf16 value) {
  return atomic_16bit_extreme<true>(address, value);
}
TILE_DEVICE tile_bf16 atomic_min(tile_bf16* address, tile_bf16 value) {
  return atomic_16bit_extreme<false>(address, value);
}
#endif  // TILE_SIMT_EMULATED

}  // namespace tile
