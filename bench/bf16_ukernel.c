/* Times the bf16 micro-kernel (packages/tile-backends-cpu/.../ukernels/bf16_gemm.c) alone, single thread, on the
 * calls the 2048^3 GEMM program makes: one BM x BN x 2048 block per call, A read in place (row stride 2048), B
 * from panels prepacked once (tile_bf16_pack_b_group), C into a BM x BN float32 block then rounded to bf16.
 *
 *   gcc -O3 -mavx512f -mavx512bw -mavx512bf16 -fno-strict-aliasing -I. \
 *       -DSOURCE='"packages/tile-backends-cpu/src/tile/backends/cpu/ukernels/bf16_gemm.c"' \
 *       bench/bf16_ukernel.c -o /tmp/bf16_ukernel && /tmp/bf16_ukernel seq 256 256
 *
 * `block BM BN`: the blocks of one row panel (the same A rows), best of 40 passes.
 * `seq BM BN`: every block of the product in grid order, plus the B prepacking; each block's time is its best
 * over 15 passes, so that on a shared machine a preempted call does not count. Add -DTILE_AMX_KCP=... to try
 * another K chunk. TILE_CPU_AMX=0 is not read here: the AMX path runs where the CPU has it.
 * `program BM BN`: whole passes as the lowered program runs them (pack B, then per block the call and the
 * rounding of C to bf16), best of 15 passes in thread CPU time (preemption does not count, the caches' state
 * between blocks does), interleaved: C rounded with ordinary stores (`plain`, the generated epilogue) and by
 * tile_bf16_store_c with non-temporal stores (`stream`, what the stream_gemm_c pass makes of it for a C larger
 * than the L2 caches). The per-block sums of `seq` leave out what passes lose between blocks (about 10% here). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include SOURCE

enum { N = 2048 };
static int BM = 256, BN = 256;
static uint16_t *A, *B, *Cout;
static uint32_t* packed;
static const long group_stride = (long)(N / 2) * TILE_NC;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void pack_all(void) {
  for (int g = 0; g < N / TILE_NC; ++g) tile_bf16_pack_b_group(B, B + 1, N, N, N, 0, g, packed);
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Block b of the grid (block columns fastest), as the lowered program runs it; stream: C rounded and written by
 * tile_bf16_store_c with non-temporal stores instead of ordinary ones. */
static void run_block_as(int b, float* c_block, int stream) {
  int bx = b % (N / BN), by = b / (N / BN);
  const uint16_t* a = A + (long)by * BM * N;
  tile_bf16_gemm_f32acc_packed_b(BM, BN, N, a, a + 1, N, packed + (long)(bx * BN / TILE_NC) * group_stride,
                                 group_stride, c_block, BN, 0, 0);
  if (stream) {
    tile_bf16_store_c(Cout + (long)by * BM * N + bx * BN, N, c_block, BN, BM, BN, 1);
    return;
  }
  for (int i = 0; i < BM; ++i)
    for (int j = 0; j < BN; j += 16) {
      __m512 v = _mm512_loadu_ps(c_block + i * BN + j);
      _mm256_storeu_si256((void*)(Cout + (long)(by * BM + i) * N + bx * BN + j), (__m256i)_mm512_cvtneps_pbh(v));
    }
}

static void run_block(int b, float* c_block) { run_block_as(b, c_block, 0); }

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "seq";
  if (argc > 3) BM = atoi(argv[2]), BN = atoi(argv[3]);
  if (BM <= 0 || BN <= 0 || N % BM || N % BN || BN % TILE_NC) {
    fprintf(stderr, "BM must divide %d, BN a multiple of %d dividing it\n", N, TILE_NC);
    return 2;
  }
  printf("AMX %s\n", tile_bf16_amx_setup(1) ? "on" : "off (AVX-512 BF16)");
  A = aligned_alloc(64, 2L * N * N), B = aligned_alloc(64, 2L * N * N), Cout = aligned_alloc(64, 2L * N * N);
  packed = aligned_alloc(64, 4L * group_stride * (N / TILE_NC));
  float* c_block = aligned_alloc(64, sizeof(float) * BM * BN);
  srand(1);
  for (long i = 0; i < (long)N * N; ++i) A[i] = 0x3f80 + (rand() & 0x7f), B[i] = 0x3f80 + (rand() & 0x7f);
  pack_all();
  double flop_block = 2.0 * BM * BN * N;
  if (!strcmp(mode, "block")) {
    double best = 1e9;
    for (int r = 0; r < 40; ++r) {
      double t0 = now();
      for (int bx = 0; bx < N / BN; ++bx) run_block(bx, c_block);
      double t = (now() - t0) / (N / BN);
      best = t < best ? t : best;
    }
    printf("block %dx%dx%d: %.3f ms, %.0f GFLOP/s\n", BM, BN, N, best * 1e3, flop_block / best * 1e-9);
    return 0;
  }
  int blocks = (N / BM) * (N / BN);
  if (!strcmp(mode, "program")) {
    double pass_best[2] = {1e9, 1e9};
    for (int r = 0; r < 15; ++r)
      for (int stream = 0; stream < 2; ++stream) {
        double t0 = cpu_now();
        pack_all();
        for (int b = 0; b < blocks; ++b) run_block_as(b, c_block, stream);
        t0 = cpu_now() - t0;
        pass_best[stream] = t0 < pass_best[stream] ? t0 : pass_best[stream];
      }
    for (int stream = 0; stream < 2; ++stream)
      printf("program %d^3 in %dx%d blocks, %s: %.2f ms a pass (%.0f GFLOP/s)\n", N, BM, BN,
             stream ? "stream" : "plain", pass_best[stream] * 1e3, flop_block * blocks / pass_best[stream] * 1e-9);
    return 0;
  }
  double pack_best = 1e9, *best = malloc(sizeof(double) * blocks);
  for (int b = 0; b < blocks; ++b) best[b] = 1e9;
  for (int r = 0; r < 15; ++r) {
    double t0 = now();
    pack_all();
    t0 = now() - t0;
    pack_best = t0 < pack_best ? t0 : pack_best;
    for (int b = 0; b < blocks; ++b) {
      double t1 = now();
      run_block(b, c_block);
      t1 = now() - t1;
      best[b] = t1 < best[b] ? t1 : best[b];
    }
  }
  double total = 0;
  for (int b = 0; b < blocks; ++b) total += best[b];
  printf("seq %d^3 in %dx%d blocks: pack B %.2f ms + blocks %.2f ms (%.0f GFLOP/s) = %.2f ms\n", N, BM, BN,
         pack_best * 1e3, total * 1e3, flop_block * blocks / total * 1e-9, (pack_best + total) * 1e3);
  return 0;
}
