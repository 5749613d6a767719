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
TILE_SIMT_LDMATRIX(tile_ldmatrix_x1, 1, 0)
TILE_SIMT_LDMATRIX(tile_ldmatrix_x2, 2, 0)
TILE_SIMT_LDMATRIX(tile_ldmatrix_x4, 4, 0)
TILE_SIMT_LDMATRIX(tile_ldmatrix_x1_trans, 1, 1)
TILE_SIMT_LDMATRIX(tile_ldmatrix_x2_trans, 2, 1)
TILE_SIMT_LDMATRIX(tile_ldmatrix_x4_trans, 4, 1)
TILE_SIMT_STMATRIX(tile_stmatrix_x1, 1, 0)
TILE_SIMT_STMATRIX(tile_stmatrix_x2, 2, 0)
TILE_SIMT_STMATRIX(tile_stmatrix_x4, 4, 0)
TILE_SIMT_STMATRIX(tile_stmatrix_x1_trans, 1, 1)
TILE_SIMT_STMATRIX(tile_stmatrix_x2_trans, 2, 1)
TILE_SIMT_STMATRIX(tile_stmatrix_x4_trans, 4, 1)
#undef TILE_SIMT_LDMATRIX
#undef TILE_SIMT_STMATRIX
