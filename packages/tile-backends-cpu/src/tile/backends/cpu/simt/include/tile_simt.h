// tile_simt.h: the SIMT emulator's runtime interface, shared by every emulated GPU dialect.
//
// A kernel compiled for emulation is ordinary host C++: its device header (a vendor's:
// tile_cuda.h for CUDA, tile_hip.h for HIP, each shipped by the vendor's package and
// registered with tile.backends.cpu.simt.register_device) maps each GPU builtin onto the
// calls below, mostly through the GPU C++ dialect of tile_simt_dialect.h. The
// runtime (libtile_simt, built once per machine) runs a launch: the grid's blocks on a
// pool of OS threads, and inside a block every GPU thread as a cooperatively scheduled
// fiber on that block's OS thread. Everything a GPU thread can wait on (a block or named
// barrier, a warp collective) parks the fiber and runs another; a fiber never preempts.
//
// The warp size is a launch parameter (32 for NVIDIA, 64 for AMD wave64): lanes, warp
// collectives and ballots are sized by it. Collective operations are dispatched through
// a kind code and an argument record per lane, so a new instruction family adds a kind
// and a compute function, never a new scheduling mechanism; a vendor adds its own
// (AMD's MFMA) without touching the runtime, through tile_simt_warp_call and a compute
// function in its device's native sources.
#pragma once

#include <stdint.h>
#include <stdio.h>  // printf: a kernel's device printf (T.print) is the host's

#define TILE_SIMT_ABI_VERSION 1

struct tile_simt_dim3 {
  unsigned x, y, z;
};

// What a GPU thread knows about itself; the current fiber's record is tile_simt_self.
struct tile_simt_thread {
  tile_simt_dim3 thread_idx;
  tile_simt_dim3 block_idx;
  tile_simt_dim3 block_dim;
  tile_simt_dim3 grid_dim;
  unsigned linear;     // linear thread index within the block
  unsigned lane;       // linear % warp_size
  unsigned warp;       // linear / warp_size
  unsigned warp_size;
};

// Warp collective kinds (tile_simt_collective's `kind`).
enum tile_simt_collective_kind {
  TILE_SIMT_SHFL = 1,      // i0 = mode (0 idx, 1 up, 2 down, 3 bfly), i1 = b, i2 = c, v0 = value bits
  TILE_SIMT_VOTE = 2,      // i0 = mode (0 ballot, 1 any, 2 all, 3 uni), i1 = predicate
  TILE_SIMT_SYNCWARP = 3,
  TILE_SIMT_LDMATRIX = 4,  // p0 = 32-bit regs out, p1 = row address, i0 = num, i1 = trans
  TILE_SIMT_STMATRIX = 5,  // p0 = row address, p1 = 32-bit regs in, i0 = num, i1 = trans
  // 6 was mma.sync, now the CUDA device's own collective (tile_simt_warp_call)
  TILE_SIMT_CALL = 7,      // a vendor's collective (tile_simt_warp_call; its compute function decides)
};

// One lane's operands of a warp collective; `out` is the lane's scalar result.
struct tile_simt_args {
  void* p0;
  const void* p1;
  const void* p2;
  uint64_t v0;
  int i0, i1, i2;
  uint64_t out;
};

// A launch: the runtime calls entry(args) once per GPU thread (on its fiber) and
// block_begin(dyn_smem_bytes) on a block's OS thread before the block's first fiber runs.
struct tile_simt_launch_desc {
  void (*entry)(void** args);
  void (*block_begin)(unsigned long long dyn_smem_bytes);
  void** args;
  unsigned grid[3];
  unsigned block[3];
  unsigned long long dyn_smem_bytes;
  unsigned warp_size;
  unsigned workers;                 // OS threads running blocks (0: hardware concurrency)
  unsigned long long stack_bytes;   // per fiber (0: the default)
  unsigned long long seed;          // 0: round-robin fiber order; else a seeded shuffled start/wake order
};

// Launch status codes (tile_simt_launch's return value).
enum tile_simt_status {
  TILE_SIMT_OK = 0,
  TILE_SIMT_DEADLOCK = 1,     // threads wait on something that can never complete
  TILE_SIMT_DIVERGENCE = 2,   // threads meet at different barriers or different collectives
  TILE_SIMT_MISUSE = 3,       // an instruction's contract is broken (alignment, mask, ...)
  TILE_SIMT_LAUNCH = 4,       // the launch itself is impossible (too many threads, ...)
  TILE_SIMT_RACE = 5,         // a thread read shared memory another wrote in the same epoch
};

#ifdef __cplusplus
extern "C" {
#endif

// The running GPU thread (the current fiber) of this OS thread.
extern __thread tile_simt_thread* tile_simt_self;

int tile_simt_abi_version(void);
int tile_simt_launch(const struct tile_simt_launch_desc* desc, char* error, unsigned long error_size);

// Block-wide barrier 0 (__syncthreads): every thread of the block, from the same line.
void tile_simt_syncthreads(int line);
// Named barrier `id` for `count` threads (0: the whole block); arrive_only does not wait.
void tile_simt_barrier(unsigned id, unsigned count, int arrive_only, int line);
// A warp collective: parks the lane until every lane of `mask` arrives, then computes.
uint64_t tile_simt_collective(int kind, unsigned long long mask, struct tile_simt_args* args, int line);

// A vendor's warp collective: parks the lane until every lane of `mask` arrives, then the
// last to arrive calls compute(lanes, members, warp_size, error, error_size) with every
// lane's record (indexed by lane), which returns a tile_simt_status (on a fault it writes a
// message into `error`) and may set each lane's `out`, returned here. `compute` lives in the
// vendor device's native sources (its library is loaded before its kernels); lanes that
// reach different compute functions have diverged. `name` names it in fault reports.
typedef int (*tile_simt_compute_fn)(struct tile_simt_args* lanes, unsigned long long mask, unsigned warp_size,
                                    char* error, unsigned long error_size);
uint64_t tile_simt_warp_call(tile_simt_compute_fn compute, const char* name, unsigned long long mask,
                             struct tile_simt_args* args, int line);

// Number formats exactly (IEEE half, bfloat16, OCP fp8), for vendors' native sources.
float tile_simt_half_to_float(uint16_t bits);
uint16_t tile_simt_float_to_half(float value);  // round to nearest even
float tile_simt_bfloat16_to_float(uint16_t bits);
float tile_simt_e4m3_to_float(uint8_t bits);
float tile_simt_e5m2_to_float(uint8_t bits);

// cp.async: the copy is read now and lands in dst at the wait that covers its group.
void tile_simt_cp_async(void* dst, const void* src, int size, int src_bytes);
void tile_simt_cp_async_commit(void);
void tile_simt_cp_async_wait(int pending);
void tile_simt_cp_async_wait_all(void);

// Stops the block with a fault report (a broken instruction contract found by a header).
void tile_simt_fault(int status, const char* message, int line);
// The calling thread now runs the kernel statement from `site` ("file.py:LINE", a string that
// lives as long as the kernel): a fault of this thread names it. Kernels built with checks
// (TILE_CHECK=1) call it before each statement of the user's Python kernel.
void tile_simt_kernel_line(const char* site);

// The running block's dynamic shared memory (set by the kernel wrapper at block start):
// the emulated shared window that wgmma descriptors address (start address = byte
// offset from this base, as the hardware's 18-bit shared addresses).
extern __thread unsigned char* tile_simt_shared_base;
extern __thread unsigned long long tile_simt_shared_bytes;
void tile_simt_set_shared_window(void* base, unsigned long long bytes);
// The window's full extent (what the emulator reserved): accesses past `bytes` but inside
// it are out of bounds of the block's dynamic shared memory.
void tile_simt_set_shared_capacity(unsigned long long capacity);

// ---- access checks: kernels built with TILE_EMU_CHECK=1 call these on every load/store
// (the compiler's kernel-address instrumentation; runtime/simt_runtime.cpp implements it).
// Tensors of the next launch on this OS thread, for out-of-bounds global accesses: an
// access just outside one of them (and inside none) is a fault naming it.
void tile_simt_check_tensors(const unsigned long long* ranges, const char* const* names, unsigned count);
// A block-scope static __shared__ variable (registered by the kernel wrapper's rewrite):
// the first registration in a block fills it with 0xff bytes.
void tile_simt_shared_static(void* p, unsigned long long bytes);
// fence.proxy.async: generic-proxy writes to shared memory become visible to the async
// proxy (wgmma operand reads, TMA). A wgmma that reads bytes changed since is a fault.
void tile_simt_fence_proxy_async(void);

// ---- sm_90: mbarriers, TMA, wgmma (runtime/simt_hopper.cpp computes, the scheduler waits)
// An mbarrier is keyed by its shared address; its state (phase, pending arrivals,
// expected arrivals, tx-count) lives in the block's runtime record.
void tile_simt_mbarrier_init(void* bar, unsigned count, int line);
void tile_simt_mbarrier_arrive(void* bar, unsigned count, int line);
void tile_simt_mbarrier_expect_tx(void* bar, unsigned bytes, int line);
// 1 once the phase of parity `parity` has completed. A failed test parks the thread until
// the barrier's phase changes (then it tests again), so a spinning wait never busy-loops;
// a wait nothing can complete is reported as a deadlock.
int tile_simt_mbarrier_try_wait(void* bar, unsigned parity, int line);

// The emulator's tensor map: the 128 bytes of a CUtensorMap, in this layout (built on the
// host by tile.backends.cpu.simt.encode_tensor_map, never by the CUDA driver).
#define TILE_SIMT_TENSOR_MAP_MAGIC 0x31554d4554494c54ull  // tells an emulator map from a driver one
struct tile_simt_tensor_map {
  uint64_t magic;
  uint64_t address;
  uint8_t rank, elem_bytes, swizzle, oob_fill, interleave, data_type, pad[2];
  uint64_t global_dim[5];
  uint64_t global_stride[4];  // bytes, dims 1..rank-1
  uint32_t box_dim[6];
  uint8_t element_stride[8];
};
// TMA tiled load of the box at `coords` (dim 0 first) into dst; the bytes land and
// complete-tx on `bar` later (at the latest when a thread tests `bar`).
void tile_simt_tma_load(void* dst, const void* map, void* bar, const int* coords, int rank, int line);

// TMA tiled store of the box at `coords` from the shared tile src into the tensor of `map`
// (out-of-bound elements are not written). It joins the thread's bulk async-group that the
// next commit closes, and reads src through the async proxy when that group is waited for
// (cp.async.bulk.wait_group): on the GPU it may read src until then, so a thread that
// changes src earlier races with it. A thread that exits with a store not waited for is a fault.
void tile_simt_tma_store(const void* src, const void* map, const int* coords, int rank, int line);
void tile_simt_bulk_commit(int line);
// Every committed bulk group of this thread but the newest `pending` completes here.
void tile_simt_bulk_wait(int pending, int line);

// wgmma.mma_async m64nNk16 (16-bit inputs), m64nNk32 (8-bit: e4m3, e5m2, shared
// operands read K-major only) and m64nNk8 (tf32: float32 bits of which the top 19 are
// read, operands K-major only, A from shared memory or registers): `kind` packs N, the
// input type and ss/rs (see TILE_SIMT_WGMMA_*).
#define TILE_SIMT_WGMMA_BF16 0x1000
#define TILE_SIMT_WGMMA_RS 0x2000
#define TILE_SIMT_WGMMA_E4M3 0x4000
#define TILE_SIMT_WGMMA_E5M2 0x8000
#define TILE_SIMT_WGMMA_TF32 0x10000
void tile_simt_wgmma(int kind, float* d, const void* a, unsigned long long desc_a, unsigned long long desc_b,
                     int trans_a, int trans_b, int scale_d, int line);
void tile_simt_wgmma_commit(int line);
// Warpgroup-collective: every committed group but the newest `pending` is computed here.
void tile_simt_wgmma_wait(int pending, int line);

#ifdef __cplusplus
}
#endif
