// tile_hip/ck.h: T.gemm(..., impl="ck"): the MFMA step of a gemm done by composable_kernel's
// ck_tile warp gemm (ck_tile/ops/gemm/warp/warp_gemm_attribute_mfma_impl.hpp, from the
// amd-aiter wheel), with tile's own operand loads and accumulator layout around it.
//
// Each tile_ck_mfma_* has the signature of the tile_mfma_* wrapper of the same shape
// (tile_hip/mfma.h): every lane passes its own A, B and C registers. The static_asserts hold
// CK's lane distribution to tile's (tile-layout's mfma_operand / mfma_d, mfma.h's comment):
//   A: lane l holds A[l % T][P * (l / T) + v], v < P   (kAMLane = T, kABKLane * P = K, kABKPerLane = P)
//   B: lane l holds B[P * (l / T) + v][l % T]           (kBNLane = T)
//   C: 16x16: lane l, register g holds C[4 (l / 16) + g][l % 16]   (kCNLane 16, kCMLane 4, kCM1PerLane 4)
//      32x32: C[8 (g / 4) + 4 (l / 32) + g % 4][l % 32]           (kCNLane 32, kCMLane 2, kCM1PerLane 4)
// Only included by kernels that name impl="ck"; the compiler gets CK's include folder then.
#pragma once

// tile_hip.h's stand-ins for device-library names are macros; CK's headers must see HIP's.
#pragma push_macro("rsqrtf")
#pragma push_macro("tanhf")
#pragma push_macro("erff")
#pragma push_macro("threadIdx")
#pragma push_macro("blockIdx")
#pragma push_macro("__syncthreads")
#undef rsqrtf
#undef tanhf
#undef erff
#undef threadIdx
#undef blockIdx
#undef __syncthreads
#include "ck_tile/core.hpp"
#include "ck_tile/ops/gemm/warp/warp_gemm_attribute_mfma_impl.hpp"
#pragma pop_macro("__syncthreads")
#pragma pop_macro("blockIdx")
#pragma pop_macro("threadIdx")
#pragma pop_macro("erff")
#pragma pop_macro("tanhf")
#pragma pop_macro("rsqrtf")

namespace tile_ck {

template <class Impl, int T, int K, int PerLane>
struct LanesMatchTile {
  static_assert(Impl::kM == T && Impl::kN == T && Impl::kK == K, "CK's MFMA shape is tile's");
  static_assert(Impl::kAMBlock == 1 && Impl::kBNBlock == 1, "single-block MFMA");
  static_assert(Impl::kAMLane == T && Impl::kBNLane == T, "A row / B column = lane % T");
  static_assert(Impl::kABKLane * Impl::kABKPerLane == K && Impl::kABKPerLane == PerLane,
                "lane l holds K elements P*(l/T) .. P*(l/T)+P-1");
  static_assert(Impl::kCNLane == T && Impl::kCM1PerLane == 4 && Impl::kCMLane == 64 / T &&
                    Impl::kCM0PerLane * Impl::kCM1PerLane * 64 == T * T,
                "C: column = lane % T, rows in groups of 4 registers");
  static constexpr bool value = true;
};

template <class Impl, int T, int K, int PerLane>
TILE_DEVICE void step(void* d, const void* a, const void* b) {
  static_assert(LanesMatchTile<Impl, T, K, PerLane>::value);
  typename Impl::AVecType av;
  typename Impl::BVecType bv;
  __builtin_memcpy(&av, a, sizeof(av));
  __builtin_memcpy(&bv, b, sizeof(bv));
  typename Impl::CVecType acc;
  __builtin_memcpy(&acc, d, sizeof(acc));
  Impl{}(acc, av, bv);
  __builtin_memcpy(d, &acc, sizeof(acc));
}

}  // namespace tile_ck

TILE_DEVICE void tile_ck_mfma_f32_16x16x16_f16(float* d, const void* a, const void* b) {
  tile_ck::step<ck_tile::WarpGemmAttributeMfmaImplF16F16F32M16N16K16<>, 16, 16, 4>(d, a, b);
}
TILE_DEVICE void tile_ck_mfma_f32_32x32x8_f16(float* d, const void* a, const void* b) {
  tile_ck::step<ck_tile::WarpGemmAttributeMfmaImplF16F16F32M32N32K8<>, 32, 8, 4>(d, a, b);
}
TILE_DEVICE void tile_ck_mfma_f32_16x16x16_bf16(float* d, const void* a, const void* b) {
  tile_ck::step<ck_tile::WarpGemmAttributeMfmaImplBf16Bf16F32M16N16K16<>, 16, 16, 4>(d, a, b);
}
TILE_DEVICE void tile_ck_mfma_f32_32x32x8_bf16(float* d, const void* a, const void* b) {
  tile_ck::step<ck_tile::WarpGemmAttributeMfmaImplBf16Bf16F32M32N32K8<>, 32, 8, 4>(d, a, b);
}
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
// CDNA3 int8 (K = 32 / 16, 8 bytes per lane). On gfx90a CK computes int8 with f32 MFMAs, so
// impl="ck" offers no int8 there.
TILE_DEVICE void tile_ck_mfma_i32_16x16x32_i8(int* d, const void* a, const void* b) {
  tile_ck::step<ck_tile::WarpGemmAttributeMfmaImpl_i32_16x16x32_i8<>, 16, 32, 8>(d, a, b);
}
TILE_DEVICE void tile_ck_mfma_i32_32x32x16_i8(int* d, const void* a, const void* b) {
  tile_ck::step<ck_tile::WarpGemmAttributeMfmaImpl_i32_32x32x16_i8<>, 32, 16, 8>(d, a, b);
}
#endif
