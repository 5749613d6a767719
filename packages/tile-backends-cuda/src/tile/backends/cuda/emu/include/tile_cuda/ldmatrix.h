// tile_cuda/ldmatrix.h for the SIMT emulator: ldmatrix / stmatrix (.m8n8 .b16) as warp
// collectives. Lane L (< 8 * num) gives the address of row L % 8 of matrix L / 8; the
// 32nd lane to arrive moves every lane's registers (see the CUDA header for the map).
#pragma once

static inline void tile_simt_matrix(int kind, void* p0, const void* p1, int num, int trans, int line) {
  tile_simt_args args{};
  args.p0 = p0;
  args.p1 = p1;
  args.i0 = num;
  args.i1 = trans;
  tile_simt_dialect::collective(kind, 0xffffffffull, &args, line);
}

#define TILE_SIMT_LDMATRIX(NAME, NUM, TRANS)                                                   \
  static inline void NAME(void* regs, const void* row, int line = __builtin_LINE()) {          \
    tile_simt_matrix(TILE_SIMT_LDMATRIX, regs, row, NUM, TRANS, line);                          \
  }
#define TILE_SIMT_STMATRIX(NAME, NUM, TRANS)                                                   \
  static inline void NAME(void* row, const void* regs, int line = __builtin_LINE()) {          \
    tile_simt_matrix(TILE_SIMT_STMATRIX, row, regs, NUM, TRANS, line);                          \
  }
// x1, x2, x4: each as ldmatrix and stmatrix, plain and .trans.
#define TILE_SIMT_MATRIX_FORMS(NUM)                                                            \
  TILE_SIMT_LDMATRIX(tile_ldmatrix_x##NUM, NUM, 0)                                              \
  TILE_SIMT_LDMATRIX(tile_ldmatrix_x##NUM##_trans, NUM, 1)                                      \
  TILE_SIMT_STMATRIX(tile_stmatrix_x##NUM, NUM, 0)                                              \
  TILE_SIMT_STMATRIX(tile_stmatrix_x##NUM##_trans, NUM, 1)
TILE_SIMT_MATRIX_FORMS(1)
TILE_SIMT_MATRIX_FORMS(2)
TILE_SIMT_MATRIX_FORMS(4)
#undef TILE_SIMT_MATRIX_FORMS
#undef TILE_SIMT_LDMATRIX
#undef TILE_SIMT_STMATRIX
