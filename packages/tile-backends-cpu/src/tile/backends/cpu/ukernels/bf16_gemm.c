/* bf16 x bf16 -> fp32 tile GEMM for CPUs with AVX-512 BF16 (vdpbf16ps).
 *
 * Part of tile-backends-cpu: built on first use with the host compiler and called by
 * the CPU lowering of T.gemm for bf16 operands with a float32 accumulator.
 *
 *   C[i, j] (= or +=) sum_k A(i, k) * B(k, j)
 *
 * A(i, k) is A[i * lda + k], or A[k * lda + i] when trans_a; B(k, j) is B[k * ldb + j],
 * or B[j * ldb + k] when trans_b; C is row-major with row stride ldc. The operands hold
 * bf16 values stored either as their 16-bit patterns or widened to float32 (TVM keeps
 * allocated bf16 buffers in float32): the caller passes the address of the element after
 * the first one (A1, B1) and the distance gives the storage width, 2 or 4 bytes. vdpbf16ps multiplies pairs of consecutive K, so B is packed per
 * column block into K-pair-interleaved panels (32-bit elements: B(2p, j) | B(2p+1, j)),
 * and A is read as 32-bit pairs (packed first only when it is transposed or K is odd). A panel's 64 columns are
 * two 32-column slices, each K pair of a slice 128 contiguous bytes (panel_at).
 * Each micro-kernel keeps an MR x (16 * NV) block of C in zmm registers over a K chunk.
 *
 * Where the CPU has AMX-BF16 and Linux grants this process the tile state (checked at run time
 * by tile_bf16_amx_setup, which the loader calls once), the same panels feed AMX tiles instead:
 * a panel's 16 K pairs x 16 columns are one B tile in the VNNI pair layout tdpbf16ps reads
 * (row stride TILE_SC words), so each 32 x 32 block of C is four accumulator tiles updated by
 * two A tiles (16 rows x 16 K pairs) and two B tiles per 32 K. Ragged blocks and K tails get a
 * tile configuration of their own size, so every shape stays on AMX.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TILE_MR 6
#define TILE_NV 4
#define TILE_NC (16 * TILE_NV)
#define TILE_SC 32 /* columns of a panel slice: a panel's 64 columns are two slices, each K pair of one 128 bytes */
#define TILE_KCP 128 /* K pairs per chunk: the B panel is TILE_KCP x TILE_NC x 4 bytes (32 KiB) */
/* K pairs per chunk over prepacked panels (128 KiB, kept in L2): fewer reloads of the C block than TILE_KCP,
 * measured 5% faster on the 2048^3 GEMM (Zen 4); packed-here panels stay at TILE_KCP (a stack buffer). */
#define TILE_KCP_PACKED 512

static inline uint32_t load_u32(const uint16_t* p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* The bf16 bits of element `index` of an operand stored with `wide` (float32) or 16-bit elements. */
static inline uint32_t bits_at(const void* base, int wide, long index) {
  if (wide) {
    uint32_t v;
    memcpy(&v, (const char*)base + 4 * index, sizeof v);
    return v >> 16;
  }
  uint16_t h;
  memcpy(&h, (const char*)base + 2 * index, sizeof h);
  return h;
}

static inline uint32_t pair_a(const void* A, int wide, int lda, int trans_a, int i, int k, int K) {
  uint32_t lo, hi;
  if (trans_a) {
    lo = bits_at(A, wide, (long)k * lda + i);
    hi = k + 1 < K ? bits_at(A, wide, (long)(k + 1) * lda + i) : 0;
  } else {
    lo = bits_at(A, wide, (long)i * lda + k);
    hi = k + 1 < K ? bits_at(A, wide, (long)i * lda + k + 1) : 0;
  }
  return lo | (hi << 16);
}

/* Where a panel keeps K pair p of its column j: columns 0-31 and 32-63 are two slices `ss` words apart, each K
 * pair of a slice 32 contiguous words. An AMX B tile pair (32 columns, 16 pairs) is then 2 KiB of consecutive
 * lines, which the 2048^3 program read 5-10% faster than rows 256 bytes apart (half of each read per slice). */
static inline long panel_at(long ss, int p, int j) { return (j / TILE_SC) * ss + (long)p * TILE_SC + j % TILE_SC; }

/* panel[panel_at(ss, p, j)] = B(k0 + 2p, j0 + j) | B(k0 + 2p + 1, j0 + j) << 16, zero-padded. */
static void pack_b(uint32_t* panel, long ss, const void* Bv, int wide, int ldb, int trans_b, int k0, int kc, int j0,
                   int nc, int K) {
  int pairs = (kc + 1) / 2;
  if (wide && !trans_b && nc == TILE_NC && (kc % 2 == 0)) {
    /* float32 storage: the pair is (row0 >> 16) | (row1 & 0xffff0000), one vpternlog per 16 columns. */
    const float* B = (const float*)Bv;
    for (int p = 0; p < pairs; ++p) {
      const float* r0 = B + (long)(k0 + 2 * p) * ldb + j0;
      const float* r1 = r0 + ldb;
      for (int c = 0; c < TILE_NC; c += 16) {
        __m512i x0 = _mm512_srli_epi32(_mm512_loadu_si512((const void*)(r0 + c)), 16);
        __m512i x1 = _mm512_loadu_si512((const void*)(r1 + c));
        __m512i v = _mm512_ternarylogic_epi32(x1, x0, _mm512_set1_epi32((int)0xffff0000u), 0xE4);
        _mm512_storeu_si512((void*)(panel + panel_at(ss, p, c)), v);
      }
    }
    return;
  }
  if (!wide && !trans_b && nc == TILE_NC && (kc % 2 == 0)) {
    const uint16_t* B = (const uint16_t*)Bv;
    const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7,
                                            38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi_idx = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55,
                                            23, 54, 22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
    for (int p = 0; p < pairs; ++p) {
      const uint16_t* r0 = B + (long)(k0 + 2 * p) * ldb + j0;
      const uint16_t* r1 = r0 + ldb;
      for (int c = 0; c < TILE_NC; c += 32) {
        __m512i x0 = _mm512_loadu_si512((const void*)(r0 + c));
        __m512i x1 = _mm512_loadu_si512((const void*)(r1 + c));
        _mm512_storeu_si512((void*)(panel + panel_at(ss, p, c)), _mm512_permutex2var_epi16(x0, lo_idx, x1));
        _mm512_storeu_si512((void*)(panel + panel_at(ss, p, c + 16)), _mm512_permutex2var_epi16(x0, hi_idx, x1));
      }
    }
    return;
  }
  if (!wide && trans_b && kc % 2 == 0) {
    /* B(k, j) = B[j * ldb + k]: each pair is one 32-bit word of row j, so the panel is a word transpose. */
    const uint16_t* B = (const uint16_t*)Bv;
    for (int j = 0; j < TILE_NC; ++j) {
      const uint16_t* row = B + (long)(j0 + j) * ldb + k0;
      for (int p = 0; p < pairs; ++p) panel[panel_at(ss, p, j)] = j < nc ? load_u32(row + 2 * p) : 0u;
    }
    return;
  }
  for (int p = 0; p < pairs; ++p) {
    int k = k0 + 2 * p;
    for (int j = 0; j < TILE_NC; ++j) {
      uint32_t v = 0;
      if (j < nc) {
        int jj = j0 + j;
        if (trans_b) {
          long row = (long)jj * ldb;
          v = bits_at(Bv, wide, row + k) | (k + 1 < K ? bits_at(Bv, wide, row + k + 1) << 16 : 0u);
        } else {
          v = bits_at(Bv, wide, (long)k * ldb + jj) |
              (k + 1 < K ? bits_at(Bv, wide, (long)(k + 1) * ldb + jj) << 16 : 0u);
        }
      }
      panel[panel_at(ss, p, j)] = v;
    }
  }
}

/* One MR x (16 * NV) block: acc (=|+=) A pairs x panel over `pairs` K pairs. `tail` masks the last vector. */
static inline __attribute__((always_inline)) void micro(const int MR, const int NV, int pairs,
                                                        const uint32_t* a_rows[TILE_MR], const uint32_t* panel,
                                                        long ss, float* C, int ldc, int accumulate, __mmask16 tail) {
  __m512 acc[TILE_MR][TILE_NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      __mmask16 m = v == NV - 1 ? tail : (__mmask16)0xffff;
      acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(m, C + (long)r * ldc + 16 * v) : _mm512_setzero_ps();
    }
  for (int p = 0; p < pairs; ++p) {
    __m512bh b[TILE_NV];
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512((const void*)(panel + panel_at(ss, p, 16 * v)));
    for (int r = 0; r < MR; ++r) {
      __m512bh a = (__m512bh)_mm512_set1_epi32((int)a_rows[r][p]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      __mmask16 m = v == NV - 1 ? tail : (__mmask16)0xffff;
      _mm512_mask_storeu_ps(C + (long)r * ldc + 16 * v, m, acc[r][v]);
    }
}

#define TILE_MICRO_NV(MR)                                                                  \
  switch (nv) {                                                                            \
    case 1: micro(MR, 1, pairs, a_rows, panel, ss, C, ldc, accumulate, tail); break;       \
    case 2: micro(MR, 2, pairs, a_rows, panel, ss, C, ldc, accumulate, tail); break;       \
    case 3: micro(MR, 3, pairs, a_rows, panel, ss, C, ldc, accumulate, tail); break;       \
    default: micro(MR, 4, pairs, a_rows, panel, ss, C, ldc, accumulate, tail); break;      \
  }

static void dispatch(int mr, int nv, int pairs, const uint32_t* a_rows[TILE_MR], const uint32_t* panel, long ss,
                     float* C, int ldc, int accumulate, __mmask16 tail) {
  switch (mr) {
    case 1: TILE_MICRO_NV(1) break;
    case 2: TILE_MICRO_NV(2) break;
    case 3: TILE_MICRO_NV(3) break;
    case 4: TILE_MICRO_NV(4) break;
    case 5: TILE_MICRO_NV(5) break;
    default: TILE_MICRO_NV(6) break;
  }
}

/* ---- AMX ----------------------------------------------------------------------------------- */

/* AMX intrinsics need GCC >= 11 or clang >= 12; an older compiler builds the AVX-512 paths only. */
#if defined(__clang__) ? __clang_major__ >= 12 : (defined(__GNUC__) && __GNUC__ >= 11)
#define TILE_HAVE_AMX 1
#else
#define TILE_HAVE_AMX 0
#endif

#define TILE_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
#define TILE_ARCH_REQ_XCOMP_PERM 0x1023
#define TILE_XFEATURE_XTILEDATA 18
#define TILE_AMX_ROWS 16 /* rows of an A or C tile */
#define TILE_AMX_KP 16   /* K pairs of an A tile (64 bytes a row) */
#ifndef TILE_AMX_KCP
#define TILE_AMX_KCP 128 /* K pairs per chunk: a 32-column B slice of a chunk is 16 KiB, kept in L1 */
#endif
#define TILE_AMX_ASTRIDE (TILE_AMX_KCP + 16) /* words between packed A rows: padded off a 4 KiB multiple */
#define TILE_AMX_PANEL 128                   /* rows of A packed at a time where A cannot be read in place */

static int amx_probed = -1; /* probe result: 1 usable, 0 not */
static int amx_on = 0;      /* whether gemm uses AMX: set by tile_bf16_amx_setup */

/* Whether the CPU has AMX-TILE and AMX-BF16, the OS enabled their state, and Linux lets this process use it. */
static int amx_probe(void) {
  if (!TILE_HAVE_AMX) return 0;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  if (!(d & (1u << 22)) || !(d & (1u << 24))) return 0; /* AMX-BF16, AMX-TILE */
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return 0; /* XTILECFG and XTILEDATA in XCR0 */
  return syscall(SYS_arch_prctl, TILE_ARCH_REQ_XCOMP_PERM, TILE_XFEATURE_XTILEDATA) == 0;
}

/* allow = 0: never use AMX; else use it where the probe (run once per process) succeeds. Returns whether
 * AMX is now in use. Called by the loader before any kernel runs. */
int tile_bf16_amx_setup(int allow) {
  if (allow && amx_probed < 0) amx_probed = amx_probe();
  amx_on = allow && amx_probed > 0;
  return amx_on;
}

#if TILE_HAVE_AMX
typedef struct {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_config;

/* The tile shapes last loaded with ldtilecfg in this gemm call (all 0: none yet): rows of the two row halves,
 * columns of the two column halves, K pairs per step. */
typedef struct {
  int m[2], n[2], kp;
} amx_shape;

/* Tiles 0-3: C blocks (rows i, columns j) at 2i + j; 4, 5: A rows 0-15 and 16-31; 6, 7: B columns 0-15 and
 * 16-31. m[i] rows and n[j] columns in each half (0: absent), kp K pairs. A block's tiles are stored before
 * the next is configured; ldtilecfg runs only when the shape changes (ragged blocks, the K tail). */
TILE_AMX_TARGET static void amx_configure(amx_shape* current, const int m[2], const int n[2], int kp) {
  if (current->m[0] == m[0] && current->m[1] == m[1] && current->n[0] == n[0] && current->n[1] == n[1] &&
      current->kp == kp)
    return;
  __attribute__((aligned(64))) amx_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int i = 0; i < 2; ++i) {
    if (!m[i]) continue;
    cfg.rows[4 + i] = (uint8_t)m[i];
    cfg.colsb[4 + i] = (uint16_t)(4 * kp);
    for (int j = 0; j < 2; ++j)
      if (n[j]) {
        cfg.rows[2 * i + j] = (uint8_t)m[i];
        cfg.colsb[2 * i + j] = (uint16_t)(4 * n[j]);
      }
  }
  for (int j = 0; j < 2; ++j)
    if (n[j]) {
      cfg.rows[6 + j] = (uint8_t)kp;
      cfg.colsb[6 + j] = (uint16_t)(4 * n[j]);
    }
  /* GCC 12 does not count ldtilecfg as a read of cfg and may drop the stores above (then every tile is left
   * unconfigured and the first tile instruction faults): the empty asm reads cfg first. */
  __asm__ volatile("" : : "m"(cfg) : "memory");
  _tile_loadconfig(&cfg);
  *current = (amx_shape){{m[0], m[1]}, {n[0], n[1]}, kp};
}

/* One K step of a 32 x 32 block: A rows 0-15 (a) and 16-31 (a1) by B columns 0-15 and 16-31 into tiles 0-3. Each
 * tile is loaded just before its first product, so the next step's loads wait on fewer products. */
TILE_AMX_TARGET static inline __attribute__((always_inline)) void amx_step(const char* a, const char* a1,
                                                                           long a_stride, const char* b,
                                                                           long b_stride) {
  _tile_loadd(4, a, a_stride);
  _tile_loadd(6, b, b_stride);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, b + 64, b_stride);
  _tile_dpbf16ps(1, 4, 7);
  _tile_loadd(5, a1, a_stride);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

/* C[0:mr, 0:nc] (= 0 | +=) A x B over `steps` steps of kp K pairs with tiles (mr, nc <= 32): A's row r, pair p is
 * the 32-bit word at a + r * a_stride + 4 * p (bytes); B's pair p, column j the word at b + p * b_stride + 4 * j. */
TILE_AMX_TARGET static void amx_block(amx_shape* shape, int mr, int nc, int steps, int kp, const char* a,
                                      long a_stride, const char* b, long b_stride, float* C, int ldc, int load_c) {
  const int m[2] = {mr < TILE_AMX_ROWS ? mr : TILE_AMX_ROWS, mr > TILE_AMX_ROWS ? mr - TILE_AMX_ROWS : 0};
  const int n[2] = {nc < 16 ? nc : 16, nc > 16 ? nc - 16 : 0};
  const long c_stride = 4L * ldc, a_step = 4L * kp, b_step = kp * b_stride;
  float* c1 = C + (long)TILE_AMX_ROWS * ldc;
  const char* a1 = a + TILE_AMX_ROWS * a_stride;
  amx_configure(shape, m, n, kp);
  if (load_c) {
    _tile_loadd(0, C, c_stride);
    if (n[1]) _tile_loadd(1, C + 16, c_stride);
    if (m[1]) _tile_loadd(2, c1, c_stride);
    if (m[1] && n[1]) _tile_loadd(3, c1 + 16, c_stride);
  } else {
    _tile_zero(0); /* a tile the configuration leaves out cannot be touched, even zeroed */
    if (n[1]) _tile_zero(1);
    if (m[1]) _tile_zero(2);
    if (m[1] && n[1]) _tile_zero(3);
  }
  if (m[1] && n[1]) {
    for (int s = 0; s < steps; ++s, a += a_step, a1 += a_step, b += b_step) amx_step(a, a1, a_stride, b, b_stride);
  } else {
    for (int s = 0; s < steps; ++s, a += a_step, a1 += a_step, b += b_step) {
      _tile_loadd(4, a, a_stride);
      _tile_loadd(6, b, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      if (n[1]) {
        _tile_loadd(7, b + 64, b_stride);
        _tile_dpbf16ps(1, 4, 7);
      }
      if (m[1]) {
        _tile_loadd(5, a1, a_stride);
        _tile_dpbf16ps(2, 5, 6);
        if (n[1]) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, C, c_stride);
  if (n[1]) _tile_stored(1, C + 16, c_stride);
  if (m[1]) _tile_stored(2, c1, c_stride);
  if (m[1] && n[1]) _tile_stored(3, c1 + 16, c_stride);
}

/* amx_block over `blocks` whole 32 x 32 blocks stacked down a column (block b: A rows and C rows 32 b on, the same
 * B), with each boundary interleaved: the store of a C tile is followed at once by the load (or zeroing) of the
 * next block's tile in the same register, so the loads overlap the last products instead of waiting for all four
 * stores (a microbenchmark of 8-step blocks with C in L2 measured 1.3 -> 1.6 TFLOP/s). */
TILE_AMX_TARGET static void amx_column(amx_shape* shape, int blocks, int steps, const char* a, long a_stride,
                                       const char* b, long b_stride, float* C, int ldc, int load_c) {
  const int m[2] = {TILE_AMX_ROWS, TILE_AMX_ROWS}, n[2] = {16, 16};
  const long c_stride = 4L * ldc, a_step = 4L * TILE_AMX_KP, b_step = TILE_AMX_KP * b_stride;
  const long a_block = 2 * TILE_AMX_ROWS * a_stride, c_block = 2L * TILE_AMX_ROWS * ldc;
  amx_configure(shape, m, n, TILE_AMX_KP);
  if (load_c) {
    _tile_loadd(0, C, c_stride);
    _tile_loadd(1, C + 16, c_stride);
    _tile_loadd(2, C + 16L * ldc, c_stride);
    _tile_loadd(3, C + 16L * ldc + 16, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int blk = 0; blk < blocks; ++blk, a += a_block, C += c_block) {
    const char *ak = a, *ak1 = a + TILE_AMX_ROWS * a_stride, *bk = b;
    for (int s = 0; s < steps; ++s, ak += a_step, ak1 += a_step, bk += b_step) amx_step(ak, ak1, a_stride, bk, b_stride);
    float *c1 = C + 16L * ldc, *d = C + c_block, *d1 = d + 16L * ldc;
    _tile_stored(0, C, c_stride);
    if (blk + 1 == blocks) {
      _tile_stored(1, C + 16, c_stride);
      _tile_stored(2, c1, c_stride);
      _tile_stored(3, c1 + 16, c_stride);
    } else if (load_c) {
      _tile_loadd(0, d, c_stride);
      _tile_stored(1, C + 16, c_stride);
      _tile_loadd(1, d + 16, c_stride);
      _tile_stored(2, c1, c_stride);
      _tile_loadd(2, d1, c_stride);
      _tile_stored(3, c1 + 16, c_stride);
      _tile_loadd(3, d1 + 16, c_stride);
    } else {
      _tile_zero(0);
      _tile_stored(1, C + 16, c_stride);
      _tile_zero(1);
      _tile_stored(2, c1, c_stride);
      _tile_zero(2);
      _tile_stored(3, c1 + 16, c_stride);
      _tile_zero(3);
    }
  }
}

TILE_AMX_TARGET static void amx_release(void) { _tile_release(); }
#else /* never called: amx_probe fails */
typedef struct {
  int m[2], n[2], kp;
} amx_shape;
static void amx_block(amx_shape* shape, int mr, int nc, int steps, int kp, const char* a, long a_stride,
                      const char* b, long b_stride, float* C, int ldc, int load_c) {
  (void)shape, (void)mr, (void)nc, (void)steps, (void)kp, (void)a, (void)a_stride, (void)b, (void)b_stride;
  (void)C, (void)ldc, (void)load_c;
}
static void amx_column(amx_shape* shape, int blocks, int steps, const char* a, long a_stride, const char* b,
                       long b_stride, float* C, int ldc, int load_c) {
  (void)shape, (void)blocks, (void)steps, (void)a, (void)a_stride, (void)b, (void)b_stride, (void)C, (void)ldc;
  (void)load_c;
}
static void amx_release(void) {}
#endif

/* Whether an M x N x K product runs on AMX: it is on, and there are a whole A tile of rows and of K. */
int tile_bf16_gemm_uses_amx(int M, int N, int K) {
  return amx_on && M >= TILE_AMX_ROWS && N > 0 && K >= 2 * TILE_AMX_KP;
}

/* A row of A's pairs from float32 storage: k0 .. k0 + 2 * pairs (pairs even-K whole), vectorized. */
static void pack_a_wide_row(uint32_t* out, const float* row, int pairs) {
  const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  int p = 0;
  for (; p + 16 <= pairs; p += 16) {
    __m512i x0 = _mm512_loadu_si512((const void*)(row + 2 * p));
    __m512i x1 = _mm512_loadu_si512((const void*)(row + 2 * p + 16));
    _mm512_storeu_si512((void*)(out + p), _mm512_permutex2var_epi16(x0, odd, x1));
  }
  for (; p < pairs; ++p) out[p] = bits_at(row, 1, 2 * p) | (bits_at(row, 1, 2 * p + 1) << 16);
}

/* Rows i0 .. i0 + mr of A's K pairs [k0 / 2, k0 / 2 + pairs) as 32-bit words, `stride` words apart (A stored as
 * float32, transposed, or with an odd K: rows that cannot be read in place as pairs). */
static void pack_a_rows(uint32_t* out, int stride, const void* A, int wide_a, int lda, int trans_a, int i0, int mr,
                        int k0, int kc, int pairs, int K) {
  for (int r = 0; r < mr; ++r) {
    uint32_t* row = out + (long)r * stride;
    if (wide_a && !trans_a && kc % 2 == 0)
      pack_a_wide_row(row, (const float*)A + (long)(i0 + r) * lda + k0, pairs);
    else
      for (int p = 0; p < pairs; ++p) row[p] = pair_a(A, wide_a, lda, trans_a, i0 + r, k0 + 2 * p, K);
  }
}

/* gemm() on AMX tiles (tile_bf16_gemm_uses_amx). K runs in chunks of whole 16-pair steps, then one chunk of the
 * leftover pairs. Within a chunk, each 32-column slice of B meets every 32-row block of A in turn, and the four C
 * tiles of a block are loaded and stored once per chunk. With B prepacked and A read in place (a 16-bit row-major A
 * with an even K: the lowered bf16 GEMM's case), the chunk is every whole step of K, so a block's C tiles stay in
 * the tile registers over all of K and are stored once: both operands stream from L2 (A panels stay there between
 * calls of neighbouring blocks, the B slice between the row blocks of a call). On the 2048^3 program's calls this
 * measured 2-14% faster than chunks of TILE_AMX_KCP pairs whose B slice stays in L1 but whose C tiles are stored
 * and reloaded every 8 steps (bench/bf16_ukernel.c, one thread, interleaved). Otherwise chunks are TILE_AMX_KCP
 * pairs: B is packed here per chunk, or A per row panel and chunk (other A layouts). */
static int amx_gemm(int M, int N, int K, const void* A, const void* A1, int lda, const void* B, const void* B1,
                    int ldb, const uint32_t* packed, long group_stride, float* C, int ldc, int trans_a, int trans_b,
                    int accumulate) {
  int wide_a = (const char*)A1 - (const char*)A == 4;
  int wide_b = packed ? 0 : (const char*)B1 - (const char*)B == 4;
  int direct_a = !wide_a && !trans_a && K % 2 == 0;
  /* 72 KiB: per thread, not on the stack (a caller's thread may have a small one) */
  static __thread __attribute__((aligned(64))) uint32_t a_pack[TILE_AMX_PANEL * TILE_AMX_ASTRIDE];
  __attribute__((aligned(64))) uint32_t panel_here[TILE_AMX_KCP * TILE_NC];
  if (packed && K % 2) return -1;
  amx_shape shape = {{0, 0}, {0, 0}, 0};
  int all_pairs = (K + 1) / 2, whole = all_pairs - all_pairs % TILE_AMX_KP;
  int rows_per_panel = direct_a ? M : TILE_AMX_PANEL;
  for (int p0 = 0; p0 < all_pairs;) {
    /* K pairs [p0, p0 + pairs) in steps of kp */
    int chunk = packed && direct_a ? whole : TILE_AMX_KCP;
    int pairs = p0 < whole ? (whole - p0 < chunk ? whole - p0 : chunk) : all_pairs - p0;
    int kp = p0 < whole ? TILE_AMX_KP : pairs, steps = pairs / kp;
    int k0 = 2 * p0, kc = 2 * pairs < K - k0 ? 2 * pairs : K - k0;
    int load_c = accumulate || p0 > 0;
    for (int i0 = 0; i0 < M; i0 += rows_per_panel) {
      int rows = M - i0 < rows_per_panel ? M - i0 : rows_per_panel;
      const char* a = (const char*)A + 2L * ((long)i0 * lda + k0);
      long a_stride = 2L * lda;
      if (!direct_a) {
        pack_a_rows(a_pack, TILE_AMX_ASTRIDE, A, wide_a, lda, trans_a, i0, rows, k0, kc, pairs, K);
        a = (const char*)a_pack;
        a_stride = 4L * TILE_AMX_ASTRIDE;
      }
      for (int j0 = 0; j0 < N; j0 += TILE_NC) {
        int nc = N - j0 < TILE_NC ? N - j0 : TILE_NC;
        const uint32_t* panel = panel_here;
        long ss = (long)TILE_AMX_KCP * TILE_SC;
        if (packed) {
          panel = packed + (long)(j0 / TILE_NC) * group_stride + (long)p0 * TILE_SC;
          ss = group_stride / 2;
        } else {
          pack_b(panel_here, ss, B, wide_b, ldb, trans_b, k0, kc, j0, nc, K);
        }
        for (int j = 0; j < nc; j += TILE_SC) {
          const char* slice = (const char*)(panel + (j / TILE_SC) * ss);
          int i = 0;
          if (nc - j >= 32 && kp == TILE_AMX_KP && rows >= 64) {
            i = rows / 32 * 32;
            amx_column(&shape, rows / 32, steps, a, a_stride, slice, 4L * TILE_SC, C + (long)i0 * ldc + j0 + j, ldc,
                       load_c);
          }
          for (; i < rows; i += 2 * TILE_AMX_ROWS)
            amx_block(&shape, rows - i < 32 ? rows - i : 32, nc - j < 32 ? nc - j : 32, steps, kp, a + i * a_stride,
                      a_stride, slice, 4L * TILE_SC, C + (long)(i0 + i) * ldc + j0 + j, ldc, load_c);
        }
      }
    }
    p0 += pairs;
  }
  amx_release(); /* back to the init state: cheaper context switches */
  return 0;
}

/* The product over prepacked or packed-here B panels. With `packed` non-NULL, B was packed by
 * tile_bf16_pack_b_group: the panel of K pairs [k0 / 2, k0 / 2 + TILE_KCP_PACKED) and columns [j0, j0 + TILE_NC)
 * starts at packed + (j0 / TILE_NC) * group_stride + (k0 / 2) * TILE_SC (its second slice group_stride / 2 words
 * on), and K must be even. */
static int gemm(int M, int N, int K, const void* A, const void* A1, int lda, const void* B, const void* B1, int ldb,
                const uint32_t* packed, long group_stride, float* C, int ldc, int trans_a, int trans_b,
                int accumulate) {
  int wide_a = (const char*)A1 - (const char*)A == 4;
  int wide_b = packed ? 0 : (const char*)B1 - (const char*)B == 4;
  __attribute__((aligned(64))) uint32_t panel_here[TILE_KCP * TILE_NC];
  __attribute__((aligned(64))) uint32_t a_pack[TILE_MR * TILE_KCP_PACKED];
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0) {
    if (!accumulate)
      for (int i = 0; i < M; ++i) memset(C + (long)i * ldc, 0, sizeof(float) * (size_t)N);
    return 0;
  }
  if (packed && K % 2) return -1;
  int direct_a = !wide_a && !trans_a && K % 2 == 0;
  int kcp = packed ? TILE_KCP_PACKED : TILE_KCP; /* K pairs per chunk */
  for (int k0 = 0; k0 < K; k0 += 2 * kcp) {
    int kc = K - k0 < 2 * kcp ? K - k0 : 2 * kcp;
    int pairs = (kc + 1) / 2;
    int acc_here = accumulate || k0 > 0;
    for (int j0 = 0; j0 < N; j0 += TILE_NC) {
      int nc = N - j0 < TILE_NC ? N - j0 : TILE_NC;
      int nv = (nc + 15) / 16;
      int last = nc - 16 * (nv - 1);
      __mmask16 tail = (__mmask16)(last == 16 ? 0xffff : (1u << last) - 1u);
      const uint32_t* panel = panel_here;
      long ss = (long)TILE_KCP * TILE_SC;
      if (packed) {
        panel = packed + (long)(j0 / TILE_NC) * group_stride + (long)(k0 / 2) * TILE_SC;
        ss = group_stride / 2;
      } else {
        pack_b(panel_here, ss, B, wide_b, ldb, trans_b, k0, kc, j0, nc, K);
      }
      for (int i0 = 0; i0 < M; i0 += TILE_MR) {
        int mr = M - i0 < TILE_MR ? M - i0 : TILE_MR;
        const uint32_t* a_rows[TILE_MR];
        for (int r = 0; r < mr; ++r) {
          if (direct_a) {
            a_rows[r] = (const uint32_t*)(const void*)((const uint16_t*)A + (long)(i0 + r) * lda + k0);
          } else if (wide_a && !trans_a && kc % 2 == 0) {
            pack_a_wide_row(a_pack + r * kcp, (const float*)A + (long)(i0 + r) * lda + k0, pairs);
            a_rows[r] = a_pack + r * kcp;
          } else {
            for (int p = 0; p < pairs; ++p)
              a_pack[r * kcp + p] = pair_a(A, wide_a, lda, trans_a, i0 + r, k0 + 2 * p, K);
            a_rows[r] = a_pack + r * kcp;
          }
        }
        dispatch(mr, nv, pairs, a_rows, panel, ss, C + (long)i0 * ldc + j0, ldc, acc_here, tail);
      }
    }
  }
  return 0;
}

int tile_bf16_gemm_f32acc(int M, int N, int K, const void* A, const void* A1, int lda, const void* B,
                          const void* B1, int ldb, float* C, int ldc, int trans_a, int trans_b, int accumulate) {
  if (tile_bf16_gemm_uses_amx(M, N, K))
    return amx_gemm(M, N, K, A, A1, lda, B, B1, ldb, 0, 0, C, ldc, trans_a, trans_b, accumulate);
  return gemm(M, N, K, A, A1, lda, B, B1, ldb, 0, 0, C, ldc, trans_a, trans_b, accumulate);
}

/* Packs columns [group * TILE_NC, group * TILE_NC + TILE_NC) of a whole B (rows_k x cols_n, or cols_n x rows_k
 * when trans_b) into packed + group * ((rows_k + 1) / 2) * TILE_NC, as pack_b lays out one panel: every K pair
 * of the tensor, zero-padded past rows_k and cols_n. Blocks that share B then read its panels in place
 * (tile_bf16_gemm_f32acc_packed_b) instead of each repacking them from strided rows. */
int tile_bf16_pack_b_group(const void* B, const void* B1, int ldb, int rows_k, int cols_n, int trans_b, int group,
                           uint32_t* packed) {
  int wide_b = (const char*)B1 - (const char*)B == 4;
  int j0 = group * TILE_NC;
  int nc = cols_n - j0 < TILE_NC ? cols_n - j0 : TILE_NC;
  if (nc <= 0 || rows_k <= 0) return -1;
  long pairs = (rows_k + 1) / 2;
  pack_b(packed + group * pairs * TILE_NC, pairs * TILE_SC, B, wide_b, ldb, trans_b, 0, rows_k, j0, nc, rows_k);
  return 0;
}

/* tile_bf16_gemm_f32acc with B read from tile_bf16_pack_b_group's panels: `packed` is the panel word of this
 * product's first K pair and first column (a multiple of TILE_NC) in the group's first slice, group_stride the
 * words per column group (the second slice starts group_stride / 2 words after the first). */
int tile_bf16_gemm_f32acc_packed_b(int M, int N, int K, const void* A, const void* A1, int lda,
                                   const uint32_t* packed, long group_stride, float* C, int ldc, int trans_a,
                                   int accumulate) {
  if (tile_bf16_gemm_uses_amx(M, N, K))
    return amx_gemm(M, N, K, A, A1, lda, 0, 0, 0, packed, group_stride, C, ldc, trans_a, 0, accumulate);
  return gemm(M, N, K, A, A1, lda, 0, 0, 0, packed, group_stride, C, ldc, trans_a, 0, accumulate);
}

/* 16 float32 bit patterns rounded to bf16 (in the low half of each lane): nearest, ties to even; NaN -> quiet NaN */
static inline __m512i round_bf16_x16(__m512i x, __m512i one, __m512i bias, __m512i quiet) {
  __m512i high = _mm512_srli_epi32(x, 16);
  __m512i nearest = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_and_si512(high, one)), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(x), _mm512_castsi512_ps(x), _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(nearest, nan, high, quiet);
}

/* dst[i * ldd + j] = bf16(src[i * lds + j]) for i < rows, j < cols: the rounding of T.Cast("bfloat16", x) in
 * generated code (round_bf16.py: to nearest even on the bits, a NaN kept quiet with its sign), so the values equal
 * the unfused epilogue's.
 * stream != 0: each whole 64-byte line of dst is written with a non-temporal store (no read of the line first,
 * no eviction of the operands a GEMM reuses), then sfence; the stream_gemm_c pass calls this for the bf16 C of a
 * GEMM too large to stay in the cores' L2 caches. Returns 0. */
int tile_bf16_store_c(uint16_t* dst, int ldd, const float* src, int lds, int rows, int cols, int stream) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  for (int i = 0; i < rows; ++i) {
    uint16_t* d = dst + (long)i * ldd;
    const float* s = src + (long)i * lds;
    int j = 0;
    while (j < cols) {
      /* 32 elements (one 64-byte line when aligned), or up to the next line boundary, or the row's end */
      int lead = (int)(((64 - ((uintptr_t)(d + j) & 63)) & 63) / 2);
      int n = lead ? lead : 32;
      if (n > cols - j) n = cols - j;
      __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1u);
      __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1u : 0u);
      __m512i x0 = _mm512_maskz_loadu_epi32(m0, s + j), x1 = _mm512_maskz_loadu_epi32(m1, s + j + 16);
      x0 = round_bf16_x16(x0, one, bias, quiet);
      x1 = round_bf16_x16(x1, one, bias, quiet);
      __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(x0)), _mm512_cvtepi32_epi16(x1), 1);
      if (stream && n == 32 && ((uintptr_t)(d + j) & 63) == 0) /* an odd-byte dst never lines up: stored */
        _mm512_stream_si512((void*)(d + j), v);
      else
        _mm512_mask_storeu_epi16(d + j, n >= 32 ? 0xffffffffu : (__mmask32)((1ull << n) - 1u), v);
      j += n;
    }
  }
  if (stream) _mm_sfence();
  return 0;
}
