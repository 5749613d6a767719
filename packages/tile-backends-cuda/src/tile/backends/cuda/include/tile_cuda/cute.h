// tile_cuda/cute.h: T.gemm(..., impl="cute"), a warp-level GEMM written with CuTe (CUTLASS 3+/4),
// for comparing CuTe's code with tile's own tensor-core lowering. Included by kernels that use
// it, after tile_cuda.h; needs CUTLASS's include/ folder on the include path (the nvidia-cutlass
// wheel's cutlass_library/source/include; the backend adds it).
//
// CuTe provides the layouts, partitioning and the gemm loop; the MMA itself is ours: the ops
// below give CuTe the register interface and traits of its SM80 m16n8k16 atoms but issue the
// instruction through tile_cuda/mma.h (no inline PTX here), so the CPU emulator, whose
// tile_cuda.h implements those wrappers, runs this path too.
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>

namespace tile_cute {

// The register interface of cute::SM80_16x8x16_F32F16F16F32_TN (cute/arch/mma_sm80.hpp):
// d = a * b + c with a 4 x u32, b 2 x u32, c/d 4 x f32, all in PTX fragment order.
#define TILE_CUTE_MMA_OP(NAME, WRAPPER)                                                        \
  struct NAME {                                                                                \
    using DRegisters = float[4];                                                               \
    using ARegisters = uint32_t[4];                                                            \
    using BRegisters = uint32_t[2];                                                            \
    using CRegisters = float[4];                                                               \
    __device__ static inline void fma(                                                        \
        float& d0, float& d1, float& d2, float& d3, uint32_t const& a0, uint32_t const& a1,     \
        uint32_t const& a2, uint32_t const& a3, uint32_t const& b0, uint32_t const& b1,        \
        float const& c0, float const& c1, float const& c2, float const& c3) {                  \
      float d[4] = {c0, c1, c2, c3};                                                           \
      const uint32_t a[4] = {a0, a1, a2, a3};                                                  \
      const uint32_t b[2] = {b0, b1};                                                          \
      WRAPPER(d, a, b);                                                                        \
      d0 = d[0];                                                                               \
      d1 = d[1];                                                                               \
      d2 = d[2];                                                                               \
      d3 = d[3];                                                                               \
    }                                                                                          \
  };

TILE_CUTE_MMA_OP(MmaF16F32, tile_mma_m16n8k16_f16_f32)
TILE_CUTE_MMA_OP(MmaBF16F32, tile_mma_m16n8k16_bf16_f32)
#undef TILE_CUTE_MMA_OP

}  // namespace tile_cute

namespace cute {
// Same shapes, thread/value layouts and value types as CuTe's own SM80 atoms.
template <>
struct MMA_Traits<tile_cute::MmaF16F32> : MMA_Traits<SM80_16x8x16_F32F16F16F32_TN> {};
template <>
struct MMA_Traits<tile_cute::MmaBF16F32> : MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN> {};
}  // namespace cute

namespace tile_cute {

// A shared tile of Rows x Cols 16-bit elements as tile stores it (tile.layout.swizzle): rows of
// Span elements (a row wider than Span is cut into Cols / Span column blocks stacked one after
// another), 16-byte chunks XOR-permuted by Swizzle<SwizzleBits, 3, 3> (none for 0): logical
// (row, col) -> element offset.
// The (MN, K) view CuTe's TN atoms partition: storage (MN, K) as is, storage (K, MN) transposed.
template <bool KContiguous, int Rows, int Cols, int Span, int SwizzleBits>
__device__ __forceinline__ constexpr auto operand_layout() {
  using namespace cute;
  static_assert(Cols % Span == 0, "columns must be whole spans");
  auto plain = Layout<Shape<Int<Rows>, Shape<Int<Span>, Int<Cols / Span>>>,
                      Stride<Int<Span>, Stride<_1, Int<Rows * Span>>>>{};
  if constexpr (KContiguous) {
    return composition(Swizzle<SwizzleBits, 3, 3>{}, plain);
  } else {
    return composition(Swizzle<SwizzleBits, 3, 3>{}, make_layout(get<1>(plain), get<0>(plain)));
  }
}

// C += A * B for one block: warp w owns sub-tile (w / WarpsN, w % WarpsN) of WarpM x WarpN
// elements, as tile's own T.gemm lowering splits it, and multiplies it with
// a one-atom TiledMMA (m16n8k16), so CuTe's MMA_M / MMA_N tiles of the warp are contiguous
// 16-row / 8-column blocks.
//
//   Op                 tile_cute::MmaF16F32 or MmaBF16F32
//   A*/B* storage      rows, cols, swizzle span (elements), swizzle bits of the shared tile
//   AK / BK            whether the tile stores K last (A as [M][K], B as [N][K])
//   Acc*               the accumulator: thread's value (v0, v1, mma_m, mma_n) of CuTe's
//                      ((2,2), MMA_M, MMA_N) C partition lives at acc[AccV0*v0 + AccV1*v1 +
//                      AccM*mma_m + AccN*mma_n] (strides computed from C's fragment layout)
template <class Op, int WarpsN, int WarpM, int WarpN, int K,                              //
          bool AK, int ARows, int ACols, int ASpan, int ASwizzle,                        //
          bool BK, int BRows, int BCols, int BSpan, int BSwizzle,                        //
          int AccV0, int AccV1, int AccM, int AccN>
__device__ __forceinline__ void gemm(const void* a_smem, const void* b_smem, float* acc, int tid) {
  using namespace cute;
  using Traits = MMA_Traits<Op>;
  using TA = typename Traits::ValTypeA;
  using TB = typename Traits::ValTypeB;
  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp / WarpsN, wn = warp % WarpsN;

  Tensor sA = make_tensor(make_smem_ptr(static_cast<const TA*>(a_smem)),
                          operand_layout<AK, ARows, ACols, ASpan, ASwizzle>());  // (M, K)
  Tensor sB = make_tensor(make_smem_ptr(static_cast<const TB*>(b_smem)),
                          operand_layout<BK, BRows, BCols, BSpan, BSwizzle>());  // (N, K)
  Tensor wA = local_tile(sA, make_shape(Int<WarpM>{}, Int<K>{}), make_coord(wm, 0));  // (WarpM, K)
  Tensor wB = local_tile(sB, make_shape(Int<WarpN>{}, Int<K>{}), make_coord(wn, 0));  // (WarpN, K)

  TiledMMA tiled = make_tiled_mma(Op{});
  auto thread = tiled.get_slice(lane);
  Tensor tAs = thread.partition_A(wA);  // ((2,2,2), MMA_M, MMA_K)
  Tensor tBs = thread.partition_B(wB);  // ((2,2), MMA_N, MMA_K)
  Tensor tAr = thread.partition_fragment_A(wA);
  Tensor tBr = thread.partition_fragment_B(wB);
  copy(tAs, tAr);
  copy(tBs, tBr);

  constexpr int MmaM = WarpM / 16, MmaN = WarpN / 8;
  Tensor tC = make_tensor(make_rmem_ptr(acc),
                          Layout<Shape<Shape<_2, _2>, Int<MmaM>, Int<MmaN>>,
                                 Stride<Stride<Int<AccV0>, Int<AccV1>>, Int<AccM>, Int<AccN>>>{});
  cute::gemm(tiled, tC, tAr, tBr, tC);
}

}  // namespace tile_cute
