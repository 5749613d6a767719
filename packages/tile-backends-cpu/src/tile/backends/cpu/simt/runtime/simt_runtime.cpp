// The SIMT emulator's scheduler: blocks on OS threads, GPU threads as fibers.
//
// Each worker OS thread takes blocks from a shared counter and runs one block at a
// time. A block's GPU threads are fibers with their own small stacks, switched by a
// few instructions of hand-written assembly (ucontext elsewhere than x86-64). A fiber
// runs until it waits (a barrier, a warp collective) or exits; then the next ready
// fiber runs, in FIFO order. When no fiber is ready and some have not exited, the
// block can never finish: that is reported as a deadlock naming what each waits on.
// A fault anywhere stops the launch: workers finish their current block's bookkeeping
// and take no new blocks, and the first fault's report is returned.
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <signal.h>

#include "simt_internal.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

__thread tile_simt_thread* tile_simt_self = nullptr;
__thread unsigned char* tile_simt_shared_base = nullptr;
__thread unsigned long long tile_simt_shared_bytes = 0;

namespace tile_simt {
namespace {

constexpr unsigned kMaxNamedBarriers = 16;
constexpr unsigned kMaxThreads = 1024;
constexpr size_t kDefaultStack = 256 * 1024;
constexpr size_t kMessage = 2048;

// ------------------------------------------------------------------ context switch
#if defined(__x86_64__)
extern "C" void tile_simt_switch_context(void** save_sp, void* next_sp);
extern "C" void tile_simt_fiber_trampoline();
// Saves the callee-saved registers on the current stack, swaps stack pointers and
// restores the next context's registers. A new fiber's stack holds zeros for rbp/rbx,
// its Fiber* in r12 and its entry in r13, and returns into the trampoline.
asm(R"(
  .text
  .p2align 4
  .globl tile_simt_switch_context
  .hidden tile_simt_switch_context
  .type tile_simt_switch_context,@function
tile_simt_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tile_simt_switch_context, .-tile_simt_switch_context
  .globl tile_simt_fiber_trampoline
  .hidden tile_simt_fiber_trampoline
  .type tile_simt_fiber_trampoline,@function
tile_simt_fiber_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size tile_simt_fiber_trampoline, .-tile_simt_fiber_trampoline
)");
#endif

struct Fiber;
struct Worker;
void fiber_main(Fiber* fiber);

struct AsyncCopy {
  unsigned char* dst;
  unsigned char data[16];
  int size;
  long group;  // -1 until committed
};

// A TMA store (cp.async.bulk.tensor, shared -> global) a thread issued: it reads its
// source when its bulk async-group is waited for, the latest moment the GPU may read it.
struct BulkStore {
  const unsigned char* src;
  tile_simt_tensor_map map;
  int coords[5];
  int rank;
  int line;
  long group;  // -1 until committed
};

enum class State { kReady, kRunning, kBarrier, kCollective, kMbarrier, kWarpgroup, kExited };

// A suspended stack: a fiber's, or the worker's own while its fibers run. On x86-64 the
// saved registers sit on the stack and the stack pointer is all there is to keep.
struct Context {
  void* sp = nullptr;
#if !defined(__x86_64__)
  ucontext_t uc;
#endif
};

struct Fiber {
  Context context;
  unsigned char* stack_lo = nullptr;
  size_t stack_size = 0;
  tile_simt_thread info{};
  State state = State::kReady;
  unsigned wait_id = 0;  // barrier id or warp
  int wait_line = 0;
  int wait_kind = 0;     // collective kind
  std::vector<AsyncCopy> async;
  long committed = 0;
  std::vector<BulkStore> bulk;  // TMA stores not yet waited for
  long bulk_committed = 0;
  Worker* worker = nullptr;
  const char* site = nullptr;  // "file.py:LINE" of the kernel statement running (checked kernels)
};

struct Barrier {
  unsigned expected = 0;
  unsigned arrived = 0;
  int line = 0;
  bool whole_block = false;
  std::vector<unsigned> waiters;
  std::vector<unsigned> release;  // access checks: the join of this round's arrivers' clocks
};

struct WarpSlot {
  int kind = 0;
  tile_simt_compute_fn compute = nullptr;  // a vendor collective's (TILE_SIMT_CALL)
  const char* name = "";
  int line = 0;
  unsigned long long mask = 0;
  unsigned arrived = 0;
  unsigned expected = 0;
  std::vector<unsigned> waiters;
  tile_simt_args args[64];
};

// An mbarrier (PTX "mbarrier"): keyed by its shared address, valid from its init.
struct MBarrier {
  const void* address = nullptr;
  unsigned phase = 0;
  unsigned expected = 0;
  long long pending = 0;
  long long tx = 0;
  int line = 0;
  std::vector<unsigned> waiters;
  // access checks: the join of the current phase's arrivers' clocks, and of every completed
  // phase's (what a wait that returns has seen)
  std::vector<unsigned> release, completed;
};

// A TMA load issued but not landed: it lands (and completes its bytes on `bar`) when a
// thread tests that barrier, or when no thread can run otherwise.
struct PendingTma {
  unsigned char* dst;
  const void* bar;
  tile_simt_tensor_map map;
  int coords[5];
  int rank;
  int line;
};

// The wgmma state of one warpgroup: ops issued (not yet computed) in issue order, the
// group boundaries from the commits, and the rendezvous of wgmma.wait_group.
struct Warpgroup {
  std::vector<WgmmaOp> ops;  // ops[i] is op number base + i
  long base = 0;
  std::vector<long> group_end;  // op number after group g's last op
  long done_groups = 0;
  long issued[128] = {};
  long commits[128] = {};
  unsigned arrived = 0;
  int wait_pending = 0;
  int line = 0;
  std::vector<unsigned> waiters;
};

struct Stacks {
  unsigned char* base = nullptr;
  size_t bytes = 0;
  size_t stack_size = 0;
  unsigned count = 0;
};

std::mutex stack_pool_lock;
std::vector<Stacks> stack_pool;

Stacks take_stacks(unsigned count, size_t stack_size) {
  {
    std::lock_guard<std::mutex> guard(stack_pool_lock);
    for (size_t i = 0; i < stack_pool.size(); ++i) {
      if (stack_pool[i].count >= count && stack_pool[i].stack_size == stack_size) {
        Stacks found = stack_pool[i];
        stack_pool.erase(stack_pool.begin() + (long)i);
        return found;
      }
    }
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  Stacks stacks;
  stacks.stack_size = stack_size;
  stacks.count = count;
  stacks.bytes = (stack_size + page) * count;
  void* base = mmap(nullptr, stacks.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return Stacks{};
  stacks.base = (unsigned char*)base;
  for (unsigned i = 0; i < count; ++i) mprotect(stacks.base + i * (stack_size + page), page, PROT_NONE);  // guard
  return stacks;
}

void give_back_stacks(const Stacks& stacks) {
  if (!stacks.base) return;
  std::lock_guard<std::mutex> guard(stack_pool_lock);
  if (stack_pool.size() < 16) {
    stack_pool.push_back(stacks);
  } else {
    munmap(stacks.base, stacks.bytes);
  }
}

// A tensor of a checked launch (TILE_EMU_CHECK): accesses just outside it are faults.
struct TensorRange {
  uintptr_t lo = 0, hi = 0;
  std::string name;
};

thread_local std::vector<TensorRange> staged_tensors;  // for this OS thread's next launch

struct Launch {
  const tile_simt_launch_desc* desc;
  std::vector<TensorRange> tensors;
  unsigned threads;
  unsigned long long blocks;
  std::atomic<unsigned long long> next_block{0};
  std::atomic<bool> abort{false};
  std::mutex error_lock;
  int status = TILE_SIMT_OK;
  std::string message;
};

struct Worker {
  Launch* launch = nullptr;
  const tile_simt_launch_desc* desc = nullptr;
  unsigned threads = 0;
  unsigned warp_size = 32;
  std::vector<Fiber> fibers;
  Stacks stacks;
  Context main;  // the worker's loop, suspended while a fiber of its block runs
  std::vector<unsigned> ready;  // ring buffer of fiber indices
  size_t ready_head = 0, ready_count = 0;
  Barrier barriers[kMaxNamedBarriers];
  std::vector<WarpSlot> warps;
  std::vector<MBarrier> mbarriers;
  std::vector<PendingTma> tma;
  std::vector<Warpgroup> warpgroups;
  // What the async proxy (wgmma, TMA) sees of the shared window: generic-proxy writes
  // reach it only at a fence.proxy.async; TMA writes reach both views.
  std::vector<unsigned char> async_view;
  // static __shared__ variables poisoned in this block: (address, bytes)
  std::vector<std::pair<uintptr_t, unsigned long long>> static_shared;
  // Access checks: the shared window's reserved extent, and per byte of the block's dynamic
  // shared memory the last writer (thread + 1, 0 none) and the writer's own clock at that
  // write. Happens-before is tracked with vector clocks: clocks[t * threads + u] is the
  // latest clock of thread u that thread t has synchronised with. A thread's own entry
  // advances at each of its release points (arriving at a barrier or an mbarrier, the end of
  // a warp collective or a warpgroup's wgmma wait); a read races when the byte's writer is
  // another thread whose write the reader has not synchronised with, and so does a write of
  // another value (see PendingWrite). Only the threads a
  // synchronisation joins are ordered by it: a named barrier of warpgroup 0 orders nothing
  // for warpgroup 1.
  unsigned long long shared_capacity = 0;
  unsigned long long block_serial = 0, shadow_serial = 0, checked_serial = 0, clock_serial = 0;
  std::vector<uint16_t> writer;
  std::vector<unsigned> written_clock;
  std::vector<unsigned> clocks;
  // Unordered writes of a byte another thread wrote, judged at the next checked access (the
  // store itself follows its check): two threads storing the same value (every threadIdx.y
  // group doing threadIdx.x's work) leave nothing to race over; a different value is a race.
  struct PendingWrite {
    unsigned long long block_serial;
    size_t offset;
    unsigned char before;  // the byte the earlier writer left
    unsigned writer, earlier;
    void* pc;
    int line;
    const char* site;
  };
  std::vector<PendingWrite> pending;
  Fiber* current = nullptr;
  unsigned exited = 0;
  tile_simt_dim3 block{};
  int status = TILE_SIMT_OK;
  std::string message;
  unsigned long long rng = 0;
};

__thread Worker* this_worker = nullptr;

// ------------------------------------------------------------------ scheduling
unsigned long long next_random(Worker* w) {
  w->rng ^= w->rng << 13;
  w->rng ^= w->rng >> 7;
  w->rng ^= w->rng << 17;
  return w->rng;
}

void push_ready(Worker* w, unsigned index) {
  w->ready[(w->ready_head + w->ready_count) % w->ready.size()] = index;
  ++w->ready_count;
  w->fibers[index].state = State::kReady;
}

// ------------------------------------------------------------------ happens-before (access checks)
// Tracked from a block's first checked shared-memory access: a synchronisation before any
// recorded write orders nothing the check looks at.
bool tracking(const Worker* w) { return w->clock_serial == w->block_serial; }

unsigned* clock_of(Worker* w, unsigned thread) { return w->clocks.data() + (size_t)thread * w->threads; }

void max_into(unsigned* into, const unsigned* from, unsigned n) {
  for (unsigned u = 0; u < n; ++u) into[u] = std::max(into[u], from[u]);
}

void join_into(std::vector<unsigned>& into, const unsigned* from, unsigned n) {
  if (into.size() != n) into.assign(n, 0);
  max_into(into.data(), from, n);
}

// A release point of `thread`: what it did so far joins `into` (a barrier round's or an
// mbarrier phase's), and its own clock moves on.
void release(Worker* w, unsigned thread, std::vector<unsigned>& into) {
  join_into(into, clock_of(w, thread), w->threads);
  ++clock_of(w, thread)[thread];
}

void acquire(Worker* w, unsigned thread, const std::vector<unsigned>& from) {
  if (!from.empty()) max_into(clock_of(w, thread), from.data(), w->threads);
}

void start_clocks(Worker* w) {
  w->clocks.assign((size_t)w->threads * w->threads, 0);
  for (unsigned t = 0; t < w->threads; ++t) clock_of(w, t)[t] = 1;
  for (auto& barrier : w->barriers) barrier.release.clear();
  for (auto& bar : w->mbarriers) bar.release.clear(), bar.completed.clear();
  w->clock_serial = w->block_serial;
}

// Every member (the parked `waiters` and the last arriver `self`) sees what all of them did
// before it, and each then starts a new interval of its own.
void rendezvous(Worker* w, const std::vector<unsigned>& waiters, unsigned self) {
  if (!tracking(w)) return;
  std::vector<unsigned> joined(clock_of(w, self), clock_of(w, self) + w->threads);
  for (unsigned t : waiters) join_into(joined, clock_of(w, t), w->threads);
  for (unsigned t : waiters) std::copy(joined.begin(), joined.end(), clock_of(w, t)), ++clock_of(w, t)[t];
  std::copy(joined.begin(), joined.end(), clock_of(w, self));
  ++clock_of(w, self)[self];
}

void push_ready_all(Worker* w, std::vector<unsigned>& indices) {
  if (w->rng) {
    for (size_t i = indices.size(); i > 1; --i) std::swap(indices[i - 1], indices[next_random(w) % i]);
  }
  for (unsigned index : indices) push_ready(w, index);
  indices.clear();
}

void swap_context(Context* save, Context* next) {
#if defined(__x86_64__)
  tile_simt_switch_context(&save->sp, next->sp);
#else
  swapcontext(&save->uc, &next->uc);
#endif
}

// Runs `to` (the current context, a fiber's or the worker's, is saved in `from`).
void switch_to(Context* from, Fiber* to) {
  Worker* w = to->worker;
  w->current = to;
  to->state = State::kRunning;
  tile_simt_self = &to->info;
  swap_context(from, &to->context);
}

void switch_to_main(Fiber* from) {
  Worker* w = from->worker;
  w->current = nullptr;
  tile_simt_self = nullptr;
  swap_context(&from->context, &w->main);
}

std::string thread_list(const std::vector<unsigned>& ids) {
  std::vector<unsigned> sorted(ids);
  std::sort(sorted.begin(), sorted.end());
  std::string text;
  size_t i = 0;
  while (i < sorted.size()) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!text.empty()) text += ", ";
    text += std::to_string(sorted[i]);
    if (j > i) text += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  return text;
}

const char* collective_name(int kind) {
  switch (kind) {
    case TILE_SIMT_SHFL: return "a warp shuffle";
    case TILE_SIMT_VOTE: return "a warp vote";
    case TILE_SIMT_SYNCWARP: return "__syncwarp";
    case TILE_SIMT_LDMATRIX: return "ldmatrix";
    case TILE_SIMT_STMATRIX: return "stmatrix";
    default: return "a warp collective";
  }
}

std::string barrier_name(unsigned id, const Barrier& barrier) {
  if (id == 0 && barrier.whole_block) return "__syncthreads";
  return "named barrier " + std::to_string(id);
}

// Stops the block: records the first fault and returns to the worker's main context.
// ", in the kernel at file.py:LINE" of the faulting thread's statement (checked kernels mark
// their statements with tile_simt_kernel_line), or "".
std::string at_site(const Fiber* f) {
  return f && f->site ? std::string(", in the kernel at ") + f->site : std::string();
}

[[noreturn]] void fault_block(Worker* w, int status, const std::string& message) {
  if (w->status == TILE_SIMT_OK) {
    w->status = status;
    w->message = message + at_site(w->current);
  }
  switch_to_main(w->current);
  __builtin_unreachable();
}

// ------------------------------------------------------------------ memory faults
// A kernel that loads or stores outside any mapping (an unchecked out-of-bounds access, a
// fiber stack overflow into its guard page) raises SIGSEGV or SIGBUS on an emulated GPU
// thread. The handler, on a per-worker alternate stack, turns it into a fault of the block,
// as a GPU reports an illegal address, instead of letting it take the host process down.
// A signal outside an emulated thread goes to the handler that was there before.
struct sigaction previous_segv, previous_bus;
std::once_flag handlers_installed;

void on_memory_fault(int sig, siginfo_t* info, void* context) {
  Worker* w = this_worker;
  if (w && w->current) {
    const tile_simt_thread& t = w->current->info;
    char text[256];
    snprintf(text, sizeof text,
             "%s: thread (%u, %u, %u) touched unmapped memory at %p (an out-of-bounds load or store, "
             "or a stack overflow); rerun with TILE_CHECK=1 to find the access",
             sig == SIGBUS ? "bus error" : "segmentation fault", t.thread_idx.x, t.thread_idx.y, t.thread_idx.z,
             info ? info->si_addr : nullptr);
    if (w->status == TILE_SIMT_OK) {
      w->status = TILE_SIMT_MISUSE;
      w->message = text + at_site(w->current);
    }
    switch_to_main(w->current);  // abandons the handler's frame on the alternate stack
    __builtin_unreachable();
  }
  const struct sigaction& before = sig == SIGBUS ? previous_bus : previous_segv;
  if (before.sa_flags & SA_SIGINFO) {
    if (before.sa_sigaction) return before.sa_sigaction(sig, info, context);
  } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN && before.sa_handler) {
    return before.sa_handler(sig);
  }
  signal(sig, SIG_DFL);  // no one else wants it: the default action, on return
}

void install_fault_handlers() {
  std::call_once(handlers_installed, [] {
    struct sigaction action {};
    action.sa_sigaction = on_memory_fault;
    sigemptyset(&action.sa_mask);
    // SA_NODEFER: the handler never returns for a kernel fault, so the signal must stay unblocked
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigaction(SIGSEGV, &action, &previous_segv);
    sigaction(SIGBUS, &action, &previous_bus);
  });
}

// The calling thread's alternate signal stack while it runs blocks (then the one it had).
struct AltStack {
  stack_t previous{};
  std::vector<char> memory;
  AltStack() : memory(1 << 16) {
    stack_t stack{};
    stack.ss_sp = memory.data();
    stack.ss_size = memory.size();
    sigaltstack(&stack, &previous);
  }
  ~AltStack() { sigaltstack(&previous, nullptr); }
};

std::string deadlock_report(Worker* w) {
  std::string text = "deadlock: no thread can make progress.";
  for (unsigned id = 0; id < kMaxNamedBarriers; ++id) {
    const Barrier& barrier = w->barriers[id];
    if (barrier.waiters.empty()) continue;
    text += " " + barrier_name(id, barrier) + " (line " + std::to_string(barrier.line) + ") waits for " +
            std::to_string(barrier.expected) + " threads, " + std::to_string(barrier.arrived) +
            " arrived (waiting: threads " + thread_list(barrier.waiters) + ").";
  }
  for (size_t warp = 0; warp < w->warps.size(); ++warp) {
    const WarpSlot& slot = w->warps[warp];
    if (slot.waiters.empty()) continue;
    std::vector<unsigned> lanes;
    for (unsigned index : slot.waiters) lanes.push_back(w->fibers[index].info.lane);
    text += " Warp " + std::to_string(warp) + " waits at " + slot.name + " (line " +
            std::to_string(slot.line) + "): lanes " + thread_list(lanes) + " arrived, " +
            std::to_string(slot.expected) + " needed.";
  }
  for (const MBarrier& bar : w->mbarriers) {
    if (bar.waiters.empty()) continue;
    const unsigned long long where = tile_simt_shared_base && (const unsigned char*)bar.address >= tile_simt_shared_base &&
                                             (const unsigned char*)bar.address < tile_simt_shared_base + tile_simt_shared_bytes
                                         ? (unsigned long long)((const unsigned char*)bar.address - tile_simt_shared_base)
                                         : (unsigned long long)(uintptr_t)bar.address;
    char addr[64];
    snprintf(addr, sizeof addr, "%#llx", where);
    text += std::string(" mbarrier at ") + addr + " (initialised at line " + std::to_string(bar.line) + ") is in phase " +
            std::to_string(bar.phase) + " with " + std::to_string(bar.pending) + " of " + std::to_string(bar.expected) +
            " arrivals and " + std::to_string(bar.tx) + " transaction bytes outstanding (waiting: threads " +
            thread_list(bar.waiters) + ").";
  }
  for (size_t g = 0; g < w->warpgroups.size(); ++g) {
    const Warpgroup& wg = w->warpgroups[g];
    if (wg.waiters.empty()) continue;
    text += " Warpgroup " + std::to_string(g) + " waits at wgmma.wait_group (line " + std::to_string(wg.line) +
            "): threads " + thread_list(wg.waiters) + " arrived, 128 needed.";
  }
  std::vector<unsigned> exited;
  for (unsigned i = 0; i < w->threads; ++i)
    if (w->fibers[i].state == State::kExited) exited.push_back(i);
  if (!exited.empty()) text += " Threads " + thread_list(exited) + " exited without reaching it.";
  return text;
}

// The current fiber cannot continue: run the next ready one, or end the block.
void land_tma(Worker* w, const void* bar);

void run_next(Worker* w) {
  Fiber* from = w->current;
  if (w->ready_count == 0 && !w->tma.empty()) land_tma(w, nullptr);  // the copy engine runs when threads wait
  if (w->ready_count == 0) {
    if (w->exited == w->threads) switch_to_main(from);
    else fault_block(w, TILE_SIMT_DEADLOCK, deadlock_report(w));
    return;
  }
  const unsigned index = w->ready[w->ready_head];
  w->ready_head = (w->ready_head + 1) % w->ready.size();
  --w->ready_count;
  Fiber* to = &w->fibers[index];
  if (to == from) {
    to->state = State::kRunning;
    return;
  }
  switch_to(&from->context, to);
}

void fiber_main(Fiber* fiber) {
  Worker* w = fiber->worker;
  w->desc->entry(w->desc->args);
  fiber->async.clear();  // copies never waited for are never seen
  if (!fiber->bulk.empty())  // the block's shared memory may go to another block while they read it
    fault_block(w, TILE_SIMT_MISUSE,
                "TMA store: a thread exited with " + std::to_string(fiber->bulk.size()) +
                    " store(s) it never waited for (cp.async.bulk.commit_group, then "
                    "cp.async.bulk.wait_group.read 0 before the thread exits)" +
                    (fiber->bulk.front().line > 0 ? " (line " + std::to_string(fiber->bulk.front().line) + ")" : ""));
  fiber->state = State::kExited;
  ++w->exited;
  run_next(w);
  __builtin_unreachable();
}

#if !defined(__x86_64__)
void fiber_entry_ucontext(unsigned lo, unsigned hi) {
  fiber_main((Fiber*)(((uintptr_t)hi << 32) | (uintptr_t)lo));
}
#endif

// Bytes at the top of each fiber's stack (where the kernel's frame lives) filled with 0xff
// before every block: an uninitialised local array (a fragment) reads NaN / -1, not what a
// previous block left there or zeros.
constexpr size_t kPoisonedStack = 16 * 1024;

void prepare_fiber(Fiber* fiber) {
  const size_t poison = std::min(kPoisonedStack, fiber->stack_size);
  memset(fiber->stack_lo + fiber->stack_size - poison, 0xff, poison);
#if defined(__x86_64__)
  uintptr_t top = ((uintptr_t)(fiber->stack_lo + fiber->stack_size)) & ~(uintptr_t)15;
  void** sp = (void**)top;
  *--sp = (void*)&tile_simt_fiber_trampoline;
  *--sp = nullptr;                // rbp
  *--sp = nullptr;                // rbx
  *--sp = (void*)fiber;           // r12: the trampoline's argument
  *--sp = (void*)&fiber_main;     // r13: the trampoline's callee
  *--sp = nullptr;                // r14
  *--sp = nullptr;                // r15
  fiber->context.sp = sp;
#else
  getcontext(&fiber->context.uc);
  fiber->context.uc.uc_stack.ss_sp = fiber->stack_lo;
  fiber->context.uc.uc_stack.ss_size = fiber->stack_size;
  fiber->context.uc.uc_link = nullptr;
  uintptr_t p = (uintptr_t)fiber;
  makecontext(&fiber->context.uc, (void (*)())fiber_entry_ucontext, 2, (unsigned)(p & 0xffffffffu), (unsigned)(p >> 32));
#endif
}

// ------------------------------------------------------------------ a block
void run_block(Worker* w, unsigned long long linear_block) {
  const tile_simt_launch_desc* d = w->desc;
  w->block = {(unsigned)(linear_block % d->grid[0]), (unsigned)((linear_block / d->grid[0]) % d->grid[1]),
              (unsigned)(linear_block / ((unsigned long long)d->grid[0] * d->grid[1]))};
  w->ready_head = w->ready_count = 0;
  w->exited = 0;
  w->status = TILE_SIMT_OK;
  w->message.clear();
  for (auto& barrier : w->barriers) {
    barrier.arrived = 0;
    barrier.waiters.clear();
  }
  for (auto& slot : w->warps) {
    slot.arrived = 0;
    slot.waiters.clear();
  }
  w->mbarriers.clear();
  w->tma.clear();
  w->async_view.clear();
  w->static_shared.clear();
  w->shared_capacity = 0;
  ++w->block_serial;
  w->warpgroups.assign((w->threads + 127) / 128, Warpgroup());
  tile_simt_shared_base = nullptr;
  tile_simt_shared_bytes = 0;
  for (unsigned i = 0; i < w->threads; ++i) {
    Fiber* fiber = &w->fibers[i];
    tile_simt_thread& info = fiber->info;
    info.thread_idx = {i % d->block[0], (i / d->block[0]) % d->block[1], i / (d->block[0] * d->block[1])};
    info.block_idx = w->block;
    info.block_dim = {d->block[0], d->block[1], d->block[2]};
    info.grid_dim = {d->grid[0], d->grid[1], d->grid[2]};
    info.linear = i;
    info.lane = i % w->warp_size;
    info.warp = i / w->warp_size;
    info.warp_size = w->warp_size;
    fiber->async.clear();
    fiber->committed = 0;
    fiber->bulk.clear();
    fiber->bulk_committed = 0;
    fiber->site = nullptr;
    prepare_fiber(fiber);
  }
  std::vector<unsigned> order(w->threads);
  for (unsigned i = 0; i < w->threads; ++i) order[i] = i;
  push_ready_all(w, order);
  if (d->block_begin) d->block_begin(d->dyn_smem_bytes);
  const unsigned first = w->ready[w->ready_head];
  w->ready_head = (w->ready_head + 1) % w->ready.size();
  --w->ready_count;
  switch_to(&w->main, &w->fibers[first]);
  tile_simt_self = nullptr;
}

void worker_loop(Launch* launch) {
  const tile_simt_launch_desc* d = launch->desc;
  Worker w;
  w.launch = launch;
  w.desc = d;
  w.threads = launch->threads;
  w.warp_size = d->warp_size;
  w.rng = d->seed ? (d->seed * 0x9E3779B97F4A7C15ull) | 1 : 0;
  w.fibers.resize(w.threads);
  w.ready.resize(w.threads);
  w.warps.resize((w.threads + w.warp_size - 1) / w.warp_size);
  const size_t stack_size = d->stack_bytes ? (size_t)((d->stack_bytes + 4095) & ~4095ull) : kDefaultStack;
  w.stacks = take_stacks(w.threads, stack_size);
  if (!w.stacks.base) {
    std::lock_guard<std::mutex> guard(launch->error_lock);
    if (launch->status == TILE_SIMT_OK) {
      launch->status = TILE_SIMT_LAUNCH;
      launch->message = "could not map fiber stacks: " + std::string(strerror(errno));
    }
    launch->abort = true;
    return;
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (unsigned i = 0; i < w.threads; ++i) {
    w.fibers[i].worker = &w;
    w.fibers[i].stack_lo = w.stacks.base + i * (stack_size + page) + page;
    w.fibers[i].stack_size = stack_size;
  }
  AltStack alt_stack;  // where on_memory_fault runs for this worker's fibers
  this_worker = &w;
  while (!launch->abort.load(std::memory_order_relaxed)) {
    const unsigned long long block = launch->next_block.fetch_add(1);
    if (block >= launch->blocks) break;
    run_block(&w, block);
    if (w.status != TILE_SIMT_OK) {
      std::lock_guard<std::mutex> guard(launch->error_lock);
      if (launch->status == TILE_SIMT_OK) {
        launch->status = w.status;
        char where[96];
        snprintf(where, sizeof where, "block (%u, %u, %u): ", w.block.x, w.block.y, w.block.z);
        launch->message = where + w.message;
      }
      launch->abort = true;
    }
  }
  this_worker = nullptr;
  give_back_stacks(w.stacks);
}

Worker* worker_or_die(const char* what) {
  Worker* w = this_worker;
  if (!w || !w->current) {
    fprintf(stderr, "tile_simt: %s called outside an emulated kernel\n", what);
    abort();
  }
  return w;
}

std::string at_line(int line) { return line > 0 ? " (line " + std::to_string(line) + ")" : ""; }

void barrier_arrive(unsigned id, unsigned count, bool arrive_only, bool whole_block, int line) {
  Worker* w = worker_or_die("a barrier");
  Fiber* self = w->current;
  if (id >= kMaxNamedBarriers)
    fault_block(w, TILE_SIMT_MISUSE, "barrier id " + std::to_string(id) + " is out of range (0-15)" + at_line(line));
  const unsigned expected = count ? count : w->threads;
  if (expected > w->threads)
    fault_block(w, TILE_SIMT_MISUSE,
                "barrier " + std::to_string(id) + " waits for " + std::to_string(expected) + " threads, the block has " +
                    std::to_string(w->threads) + at_line(line));
  Barrier& barrier = w->barriers[id];
  if (barrier.arrived == 0) {
    barrier.expected = expected;
    barrier.line = line;
    barrier.whole_block = whole_block;
  } else if (barrier.expected != expected) {
    fault_block(w, TILE_SIMT_DIVERGENCE,
                "barrier " + std::to_string(id) + " is used with " + std::to_string(barrier.expected) + " and " +
                    std::to_string(expected) + " threads at once" + at_line(line));
  } else if (whole_block && barrier.whole_block && barrier.line != line) {
    fault_block(w, TILE_SIMT_DIVERGENCE,
                "threads of one block wait at different __syncthreads: threads " + thread_list(barrier.waiters) +
                    " at line " + std::to_string(barrier.line) + ", thread " + std::to_string(self->info.linear) +
                    " at line " + std::to_string(line));
  }
  const unsigned me = self->info.linear;
  if (tracking(w)) release(w, me, barrier.release);  // seen by the threads that wait here
  ++barrier.arrived;
  if (barrier.arrived == barrier.expected) {
    barrier.arrived = 0;
    if (tracking(w)) {
      for (unsigned t : barrier.waiters) acquire(w, t, barrier.release);
      if (!arrive_only) acquire(w, me, barrier.release);
    }
    barrier.release.clear();
    push_ready_all(w, barrier.waiters);
    return;
  }
  if (arrive_only) return;
  self->state = State::kBarrier;
  self->wait_id = id;
  self->wait_line = line;
  barrier.waiters.push_back(self->info.linear);
  run_next(w);
}

// ------------------------------------------------------------------ sm_90: mbarrier, TMA, wgmma
MBarrier* find_mbarrier(Worker* w, const void* bar) {
  for (MBarrier& found : w->mbarriers)
    if (found.address == bar) return &found;
  return nullptr;
}

MBarrier* mbarrier_or_fault(Worker* w, const void* bar, const char* what, int line) {
  MBarrier* found = find_mbarrier(w, bar);
  if (!found)
    fault_block(w, TILE_SIMT_MISUSE,
                std::string(what) + " on an mbarrier that was never initialised in this block (mbarrier.init first)" +
                    at_line(line));
  return found;
}

// The completion rule: no pending arrivals and no outstanding transaction bytes.
void mbarrier_check(Worker* w, MBarrier* bar) {
  if (bar->pending != 0 || bar->tx != 0) return;
  ++bar->phase;
  bar->pending = bar->expected;
  if (tracking(w)) {
    if (!bar->release.empty()) join_into(bar->completed, bar->release.data(), w->threads);
    bar->release.clear();
    for (unsigned t : bar->waiters) acquire(w, t, bar->completed);
  }
  push_ready_all(w, bar->waiters);
}

// Lands the pending TMA loads that complete on `bar` (all of them when bar is null).
void land_tma(Worker* w, const void* bar) {
  size_t kept = 0;
  std::vector<PendingTma> landing;
  for (size_t i = 0; i < w->tma.size(); ++i) {
    if (!bar || w->tma[i].bar == bar) landing.push_back(w->tma[i]);
    else w->tma[kept++] = w->tma[i];
  }
  w->tma.resize(kept);
  for (const PendingTma& copy : landing) {
    char error[kMessage] = {0};
    long long bytes = 0;
    const int status = tma_load(copy.map, copy.dst, copy.coords, copy.rank, tile_simt_shared_base,
                                tile_simt_shared_bytes, &bytes, error, sizeof error);
    if (status != TILE_SIMT_OK) fault_block(w, status, std::string(error) + at_line(copy.line));
    if (tile_simt_shared_base && copy.dst >= tile_simt_shared_base &&
        copy.dst + bytes <= tile_simt_shared_base + w->async_view.size()) {
      const size_t offset = (size_t)(copy.dst - tile_simt_shared_base);
      memcpy(w->async_view.data() + offset, copy.dst, (size_t)bytes);  // the async proxy wrote it
    }
    MBarrier* target = find_mbarrier(w, copy.bar);
    if (!target) fault_block(w, TILE_SIMT_MISUSE, "TMA: its mbarrier was never initialised" + at_line(copy.line));
    target->tx -= bytes;  // complete-tx
    mbarrier_check(w, target);
  }
}

// An mbarrier about to take part in its next phase: when its current phase waits only for
// bytes in flight, those land first (on the GPU they land by themselves, with no waiter).
MBarrier* settled_mbarrier(Worker* w, const void* bar, const char* what, int line) {
  MBarrier* found = mbarrier_or_fault(w, bar, what, line);
  if (found->pending == 0 && found->tx > 0) {
    land_tma(w, bar);
    found = find_mbarrier(w, bar);
  }
  return found;
}

void run_wgmma_groups(Worker* w, Warpgroup& wg, long upto_group) {
  for (; wg.done_groups < upto_group; ++wg.done_groups) {
    const long end = wg.group_end[(size_t)wg.done_groups];
    while (wg.base < end) {
      const WgmmaOp& op = wg.ops.front();
      char error[kMessage] = {0};
      const int status = compute_wgmma(op, tile_simt_shared_base, tile_simt_shared_bytes, w->async_view.data(), error,
                                       sizeof error);
      if (status != TILE_SIMT_OK) fault_block(w, status, std::string(error) + at_line(op.line));
      wg.ops.erase(wg.ops.begin());
      ++wg.base;
    }
  }
}

Warpgroup& warpgroup_of(Worker* w, const char* what, int line) {
  Fiber* self = w->current;
  const unsigned g = self->info.linear / 128;
  if ((g + 1) * 128 > w->threads)
    fault_block(w, TILE_SIMT_MISUSE,
                std::string(what) + " needs whole warpgroups of 128 threads; the block has " + std::to_string(w->threads) +
                    at_line(line));
  return w->warpgroups[g];
}

// ------------------------------------------------------------------ access checks
constexpr uintptr_t kTensorGuard = 64 * 1024;  // "just outside a tensor": this many bytes

std::string where_pc(void* pc) {
  Dl_info info;
  char text[512];
  if (pc && dladdr(pc, &info) && info.dli_fname) {
    snprintf(text, sizeof text, " [pc %s+0x%lx]", info.dli_fname,
             (unsigned long)((uintptr_t)pc - (uintptr_t)info.dli_fbase));
    return text;
  }
  return "";
}

// The unordered writes of earlier checks, their stores done since: a byte now holding another
// value than the earlier writer's is a race (both orders give different memory).
void judge_pending_writes(Worker* w) {
  std::vector<Worker::PendingWrite> pending;
  pending.swap(w->pending);
  for (const Worker::PendingWrite& p : pending) {
    if (p.block_serial != w->block_serial || !tile_simt_shared_base) continue;
    if (p.offset >= tile_simt_shared_bytes || tile_simt_shared_base[p.offset] == p.before) continue;
    if (w->status == TILE_SIMT_OK) {
      w->status = TILE_SIMT_RACE;
      w->message = "race on shared memory: thread " + std::to_string(p.writer) + " writes offset " +
                   std::to_string(p.offset) + ", which thread " + std::to_string(p.earlier) +
                   " wrote with another value, with no barrier (or other synchronisation) between the two "
                   "writes that both threads take part in: either value may be the one that stays" +
                   where_pc(p.pc) + at_line(p.line) +
                   (p.site ? std::string(", in the kernel at ") + p.site : std::string());
    }
    switch_to_main(w->current);
    __builtin_unreachable();
  }
}

// `judge`: first judge the unordered writes of earlier checks (false while one instruction's
// accesses are checked before its data moves: stmatrix's lanes).
void check_shared(Worker* w, Fiber* f, uintptr_t offset, size_t n, bool write, void* pc, int line = 0,
                  bool judge = true) {
  if (judge && !w->pending.empty()) judge_pending_writes(w);
  if (offset + n > tile_simt_shared_bytes)
    fault_block(w, TILE_SIMT_MISUSE,
                "out-of-bounds shared memory " + std::string(write ? "write" : "read") + " of " + std::to_string(n) +
                    " bytes at offset " + std::to_string(offset) + " by thread " + std::to_string(f->info.linear) +
                    ": the block has " + std::to_string(tile_simt_shared_bytes) + " bytes of dynamic shared memory" +
                    where_pc(pc) + at_line(line));
  if (w->shadow_serial != w->block_serial || w->writer.size() != tile_simt_shared_bytes) {
    w->writer.assign(tile_simt_shared_bytes, 0);
    w->written_clock.assign(tile_simt_shared_bytes, 0);
    w->shadow_serial = w->block_serial;
  }
  if (!tracking(w)) start_clocks(w);
  const uint16_t me = (uint16_t)(f->info.linear + 1);
  const unsigned* seen = clock_of(w, f->info.linear);
  for (size_t i = offset; i < offset + n; ++i) {
    const bool unordered = w->writer[i] && w->writer[i] != me && w->written_clock[i] > seen[w->writer[i] - 1u];
    if (write) {
      if (unordered)
        w->pending.push_back({w->block_serial, i, tile_simt_shared_base[i], f->info.linear,
                              (unsigned)(w->writer[i] - 1u), pc, line, f->site});
      w->writer[i] = me;
      w->written_clock[i] = seen[f->info.linear];
    } else if (unordered) {
      fault_block(w, TILE_SIMT_RACE,
                  "race on shared memory: thread " + std::to_string(f->info.linear) + " reads offset " +
                      std::to_string(i) + ", which thread " + std::to_string(w->writer[i] - 1) +
                      " wrote with no barrier (or other synchronisation) between the write and the read "
                      "that both threads take part in (a barrier of both, an mbarrier phase the writer arrived "
                      "on and the reader waited for, a warp collective of both)" +
                      where_pc(pc) + at_line(line));
    }
  }
}

void check_global(Worker* w, Fiber* f, uintptr_t a, size_t n, bool write, void* pc) {
  const std::vector<TensorRange>& tensors = w->launch->tensors;
  for (const TensorRange& t : tensors)
    if (a >= t.lo && a < t.hi) {
      if (a + n <= t.hi) return;
      break;  // starts inside, runs past the end: reported below
    }
  // the tensor the access is nearest to (just before its start or just past its end)
  const TensorRange* near = nullptr;
  uintptr_t nearest = 0;
  for (const TensorRange& t : tensors) {
    const bool before = a < t.lo && a + n + kTensorGuard > t.lo;
    const bool after = a + n > t.hi && a < t.hi + kTensorGuard;
    if (!before && !after) continue;
    const uintptr_t distance = before ? t.lo - a : a + n - t.hi;
    if (!near || distance < nearest) near = &t, nearest = distance;
  }
  if (near) {
    const TensorRange& t = *near;
    const long long offset = (long long)(a - t.lo);
    fault_block(w, TILE_SIMT_MISUSE,
                "out-of-bounds global " + std::string(write ? "write" : "read") + " of " + std::to_string(n) +
                    " bytes at byte offset " + std::to_string(offset) + " of tensor " + t.name + " (" +
                    std::to_string(t.hi - t.lo) + " bytes) by thread " + std::to_string(f->info.linear) +
                    where_pc(pc));
  }
}

// ldmatrix / stmatrix move shared memory inside the runtime, out of the instrumentation's
// sight: check each lane's 16-byte rows as that lane's own access.
void check_matrix_rows(Worker* w, int kind, const WarpSlot& slot, unsigned long long members, unsigned warp,
                       int line) {
  if (kind != TILE_SIMT_LDMATRIX && kind != TILE_SIMT_STMATRIX) return;
  const uintptr_t base = (uintptr_t)tile_simt_shared_base;
  if (!base) return;
  for (unsigned lane = 0; lane < w->warp_size; ++lane) {
    if (!((members >> lane) & 1ull)) continue;
    const tile_simt_args& args = slot.args[lane];
    if (lane >= 8u * (unsigned)args.i0) continue;  // lanes past 8 * num give no row
    const uintptr_t row = (uintptr_t)(kind == TILE_SIMT_LDMATRIX ? args.p1 : (const void*)args.p0);
    if (row - base >= std::max<unsigned long long>(w->shared_capacity, tile_simt_shared_bytes)) continue;
    check_shared(w, &w->fibers[warp * w->warp_size + lane], row - base, 16, kind == TILE_SIMT_STMATRIX, nullptr,
                 line, /*judge=*/false);
  }
}

void check_access(uintptr_t a, size_t n, bool write, void* pc) {
  Worker* w = this_worker;
  if (!w || !w->current) return;  // block_begin, or outside a launch
  w->checked_serial = w->block_serial;  // this block runs an instrumented kernel
  Fiber* f = w->current;
  if (a - (uintptr_t)f->stack_lo < f->stack_size) return;  // the thread's own registers and locals
  const uintptr_t base = (uintptr_t)tile_simt_shared_base;
  if (base && a - base < std::max<unsigned long long>(w->shared_capacity, tile_simt_shared_bytes)) {
    check_shared(w, f, a - base, n, write, pc);
    return;
  }
  const uintptr_t fibers = (uintptr_t)w->fibers.data();
  if (a - fibers < w->fibers.size() * sizeof(Fiber)) return;  // threadIdx and friends
  // static __shared__ arrays live in this OS thread's storage, which may lie next to a
  // tensor: they are shared memory, never an out-of-bounds global access
  for (const auto& array : w->static_shared)
    if (a - array.first < array.second) return;
  if (!w->launch->tensors.empty()) check_global(w, f, a, n, write, pc);
}

}  // namespace
}  // namespace tile_simt

using namespace tile_simt;

// The compiler's kernel-address instrumentation (-fsanitize=kernel-address with calls):
// kernels built with TILE_EMU_CHECK=1 call these around every load and store.
#define TILE_SIMT_ACCESS_HOOKS(N)                                                        \
  extern "C" void __asan_load##N##_noabort(uintptr_t a) {                               \
    check_access(a, N, false, __builtin_return_address(0));                              \
  }                                                                                      \
  extern "C" void __asan_store##N##_noabort(uintptr_t a) {                              \
    check_access(a, N, true, __builtin_return_address(0));                               \
  }
TILE_SIMT_ACCESS_HOOKS(1)
TILE_SIMT_ACCESS_HOOKS(2)
TILE_SIMT_ACCESS_HOOKS(4)
TILE_SIMT_ACCESS_HOOKS(8)
TILE_SIMT_ACCESS_HOOKS(16)
#undef TILE_SIMT_ACCESS_HOOKS
extern "C" void __asan_loadN_noabort(uintptr_t a, size_t n) { check_access(a, n, false, __builtin_return_address(0)); }
extern "C" void __asan_storeN_noabort(uintptr_t a, size_t n) { check_access(a, n, true, __builtin_return_address(0)); }
extern "C" void __asan_handle_no_return(void) {}

extern "C" {

int tile_simt_abi_version(void) { return TILE_SIMT_ABI_VERSION; }

void tile_simt_syncthreads(int line) { barrier_arrive(0, 0, false, true, line); }

void tile_simt_barrier(unsigned id, unsigned count, int arrive_only, int line) {
  barrier_arrive(id, count, arrive_only != 0, false, line);
}

}  // extern "C"

namespace tile_simt {
namespace {

// A warp collective of `kind` (TILE_SIMT_CALL: computed by the vendor's `compute`), named
// `name` in reports: parks the lane until every member arrives; the last one computes.
uint64_t warp_collective(int kind, tile_simt_compute_fn compute, const char* name, unsigned long long mask,
                         tile_simt_args* args, int line) {
  Worker* w = worker_or_die(name);
  Fiber* self = w->current;
  const unsigned lane = self->info.lane, warp = self->info.warp;
  WarpSlot& slot = w->warps[warp];
  const unsigned first = warp * w->warp_size;
  const unsigned present = std::min(w->warp_size, w->threads - first);
  const unsigned long long lanes = present >= 64 ? ~0ull : ((1ull << present) - 1);
  const unsigned long long members = mask & lanes;
  if (!((members >> lane) & 1ull))
    fault_block(w, TILE_SIMT_MISUSE,
                std::string(name) + ": lane " + std::to_string(lane) + " of warp " + std::to_string(warp) +
                    " is not in its own member mask" + at_line(line));
  if (slot.arrived == 0) {
    slot.kind = kind;
    slot.compute = compute;
    slot.name = name;
    slot.line = line;
    slot.mask = members;
    slot.expected = (unsigned)__builtin_popcountll(members);
  } else if (slot.kind != kind || slot.compute != compute || slot.mask != members) {
    fault_block(w, TILE_SIMT_DIVERGENCE,
                "warp " + std::to_string(warp) + " diverged at a collective: lanes wait at " + slot.name +
                    " (line " + std::to_string(slot.line) + "), lane " + std::to_string(lane) + " reached " + name +
                    at_line(line));
  }
  slot.args[lane] = *args;
  ++slot.arrived;
  if (slot.arrived == slot.expected) {
    const bool checked = w->checked_serial == w->block_serial;
    if (checked) check_matrix_rows(w, kind, slot, members, warp, line);
    char error[kMessage] = {0};
    const int status = compute ? compute(slot.args, members, w->warp_size, error, sizeof error)
                               : compute_collective(kind, slot.args, members, w->warp_size, error, sizeof error);
    if (status != TILE_SIMT_OK) fault_block(w, status, std::string(error) + at_line(line));
    if (checked && !w->pending.empty()) judge_pending_writes(w);  // stmatrix's rows have landed
    slot.arrived = 0;
    rendezvous(w, slot.waiters, self->info.linear);
    push_ready_all(w, slot.waiters);
    return slot.args[lane].out;
  }
  self->state = State::kCollective;
  self->wait_id = warp;
  self->wait_kind = kind;
  self->wait_line = line;
  slot.waiters.push_back(self->info.linear);
  run_next(w);
  return slot.args[lane].out;
}

}  // namespace
}  // namespace tile_simt

extern "C" {

uint64_t tile_simt_collective(int kind, unsigned long long mask, tile_simt_args* args, int line) {
  return warp_collective(kind, nullptr, collective_name(kind), mask, args, line);
}

uint64_t tile_simt_warp_call(tile_simt_compute_fn compute, const char* name, unsigned long long mask,
                             tile_simt_args* args, int line) {
  return warp_collective(TILE_SIMT_CALL, compute, name, mask, args, line);
}

void tile_simt_cp_async(void* dst, const void* src, int size, int src_bytes) {
  Worker* w = worker_or_die("cp.async");
  if (size != 4 && size != 8 && size != 16)
    fault_block(w, TILE_SIMT_MISUSE, "cp.async copies 4, 8 or 16 bytes, not " + std::to_string(size));
  if (src_bytes < 0 || src_bytes > size)
    fault_block(w, TILE_SIMT_MISUSE, "cp.async: src-size " + std::to_string(src_bytes) + " exceeds the copy size");
  if (((uintptr_t)dst | (uintptr_t)src) % (uintptr_t)size)
    fault_block(w, TILE_SIMT_MISUSE, "cp.async: addresses must be aligned to the copy size " + std::to_string(size));
  AsyncCopy copy;
  copy.dst = (unsigned char*)dst;
  copy.size = size;
  copy.group = -1;
  memset(copy.data, 0, sizeof copy.data);
  if (src_bytes) memcpy(copy.data, src, (size_t)src_bytes);  // read at issue; lands at its wait
  w->current->async.push_back(copy);
}

void tile_simt_cp_async_commit(void) {
  Fiber* self = worker_or_die("cp.async.commit_group")->current;
  for (AsyncCopy& copy : self->async)
    if (copy.group < 0) copy.group = self->committed;
  ++self->committed;
}

void tile_simt_cp_async_wait(int pending) {
  Worker* w = worker_or_die("cp.async.wait_group");
  Fiber* self = w->current;
  const bool checked = w->checked_serial == w->block_serial;
  const uintptr_t base = (uintptr_t)tile_simt_shared_base;
  const long complete_below = self->committed - pending;  // groups [0, complete_below) are complete
  size_t kept = 0;
  for (size_t i = 0; i < self->async.size(); ++i) {
    AsyncCopy& copy = self->async[i];
    if (copy.group >= 0 && copy.group < complete_below) {
      // under access checks the landed bytes are this thread's writes, as on the GPU (checked
      // before they land: a write is judged against what the earlier writer left)
      if (checked && base && (uintptr_t)copy.dst - base < tile_simt_shared_bytes)
        check_shared(w, self, (uintptr_t)copy.dst - base, (size_t)copy.size, true, nullptr);
      memcpy(copy.dst, copy.data, (size_t)copy.size);
    } else {
      self->async[kept++] = copy;
    }
  }
  self->async.resize(kept);
}

void tile_simt_cp_async_wait_all(void) {
  tile_simt_cp_async_commit();
  tile_simt_cp_async_wait(0);
}

void tile_simt_kernel_line(const char* site) {
  Worker* w = this_worker;
  if (w && w->current) w->current->site = site;
}

void tile_simt_fault(int status, const char* message, int line) {
  Worker* w = worker_or_die("a fault");
  fault_block(w, status ? status : TILE_SIMT_MISUSE, std::string(message) + at_line(line));
}

void tile_simt_set_shared_window(void* base, unsigned long long bytes) {
  tile_simt_shared_base = static_cast<unsigned char*>(base);
  tile_simt_shared_bytes = bytes;
  Worker* w = this_worker;
  if (w) w->async_view.assign(tile_simt_shared_base, tile_simt_shared_base + bytes);
}

void tile_simt_set_shared_capacity(unsigned long long capacity) {
  Worker* w = this_worker;
  if (w) w->shared_capacity = capacity;
}

void tile_simt_check_tensors(const unsigned long long* ranges, const char* const* names, unsigned count) {
  staged_tensors.clear();
  for (unsigned i = 0; i < count; ++i) {
    TensorRange range;
    range.lo = (uintptr_t)ranges[2 * i];
    range.hi = range.lo + (uintptr_t)ranges[2 * i + 1];
    range.name = names[i] ? names[i] : "?";
    staged_tensors.push_back(range);
  }
}

void tile_simt_shared_static(void* p, unsigned long long bytes) {
  Worker* w = worker_or_die("a __shared__ declaration");
  for (const auto& seen : w->static_shared)
    if (seen.first == (uintptr_t)p) return;
  w->static_shared.emplace_back((uintptr_t)p, bytes);
  memset(p, 0xff, (size_t)bytes);
}

void tile_simt_fence_proxy_async(void) {
  Worker* w = worker_or_die("fence.proxy.async");
  if (tile_simt_shared_base && !w->async_view.empty())
    memcpy(w->async_view.data(), tile_simt_shared_base, w->async_view.size());
}

void tile_simt_mbarrier_init(void* bar, unsigned count, int line) {
  Worker* w = worker_or_die("mbarrier.init");
  if ((uintptr_t)bar % 8) fault_block(w, TILE_SIMT_MISUSE, "mbarrier.init: the mbarrier must be 8-byte aligned" + at_line(line));
  if (count == 0 || count >= (1u << 20))
    fault_block(w, TILE_SIMT_MISUSE, "mbarrier.init: the arrival count must be in 1..2^20-1" + at_line(line));
  MBarrier* found = find_mbarrier(w, bar);
  if (found && !found->waiters.empty())
    fault_block(w, TILE_SIMT_MISUSE, "mbarrier.init on an mbarrier that threads are waiting on" + at_line(line));
  if (!found) {
    w->mbarriers.emplace_back();
    found = &w->mbarriers.back();
  }
  found->address = bar;
  found->phase = 0;
  found->expected = count;
  found->pending = count;
  found->tx = 0;
  found->line = line;
  found->release.clear();
  found->completed.clear();
  memset(bar, 0, 8);
}

void tile_simt_mbarrier_arrive(void* bar, unsigned count, int line) {
  Worker* w = worker_or_die("mbarrier.arrive");
  MBarrier* found = settled_mbarrier(w, bar, "mbarrier.arrive", line);
  if ((long long)count > found->pending)
    fault_block(w, TILE_SIMT_MISUSE,
                "mbarrier.arrive: " + std::to_string(count) + " arrivals on a phase that expects " +
                    std::to_string(found->pending) + " more" + at_line(line));
  found->pending -= count;
  if (tracking(w)) release(w, w->current->info.linear, found->release);  // seen by the phase's waiters
  mbarrier_check(w, found);
}

void tile_simt_mbarrier_expect_tx(void* bar, unsigned bytes, int line) {
  Worker* w = worker_or_die("mbarrier.expect_tx");
  MBarrier* found = settled_mbarrier(w, bar, "mbarrier.expect_tx", line);
  found->tx += bytes;
}

int tile_simt_mbarrier_try_wait(void* bar, unsigned parity, int line) {
  Worker* w = worker_or_die("mbarrier.try_wait");
  MBarrier* found = mbarrier_or_fault(w, bar, "mbarrier.try_wait", line);
  const unsigned me = w->current->info.linear;
  auto passed = [&]() {  // the phase completed: this thread has seen what its arrivers did
    if (tracking(w)) acquire(w, me, found->completed);
    return 1;
  };
  if ((parity & 1u) != (found->phase & 1u)) return passed();
  bool pending_copy = false;
  for (const PendingTma& copy : w->tma) pending_copy = pending_copy || copy.bar == bar;
  if (pending_copy) {
    land_tma(w, bar);
    found = find_mbarrier(w, bar);
    if ((parity & 1u) != (found->phase & 1u)) return passed();
  }
  // Park until the phase changes; the caller's loop tests again.
  Fiber* self = w->current;
  self->state = State::kMbarrier;
  self->wait_line = line;
  found->waiters.push_back(self->info.linear);
  run_next(w);
  found = find_mbarrier(w, bar);
  return found && (parity & 1u) != (found->phase & 1u);
}

void tile_simt_tma_load(void* dst, const void* map, void* bar, const int* coords, int rank, int line) {
  Worker* w = worker_or_die("cp.async.bulk.tensor");
  if (rank < 1 || rank > 5) fault_block(w, TILE_SIMT_MISUSE, "TMA: rank must be 1 to 5" + at_line(line));
  mbarrier_or_fault(w, bar, "cp.async.bulk.tensor completes", line);
  PendingTma copy;
  copy.dst = static_cast<unsigned char*>(dst);
  copy.bar = bar;
  memcpy(&copy.map, map, sizeof copy.map);
  memset(copy.coords, 0, sizeof copy.coords);
  memcpy(copy.coords, coords, sizeof(int) * (size_t)rank);
  copy.rank = rank;
  copy.line = line;
  w->tma.push_back(copy);
}

void tile_simt_tma_store(const void* src, const void* map, const int* coords, int rank, int line) {
  Worker* w = worker_or_die("cp.async.bulk.tensor (store)");
  if (rank < 1 || rank > 5) fault_block(w, TILE_SIMT_MISUSE, "TMA: rank must be 1 to 5" + at_line(line));
  BulkStore store;
  store.src = static_cast<const unsigned char*>(src);
  memcpy(&store.map, map, sizeof store.map);
  memset(store.coords, 0, sizeof store.coords);
  memcpy(store.coords, coords, sizeof(int) * (size_t)rank);
  store.rank = rank;
  store.line = line;
  store.group = -1;
  w->current->bulk.push_back(store);
}

void tile_simt_bulk_commit(int line) {
  (void)line;
  Fiber* self = worker_or_die("cp.async.bulk.commit_group")->current;
  for (BulkStore& store : self->bulk)
    if (store.group < 0) store.group = self->bulk_committed;
  ++self->bulk_committed;
}

void tile_simt_bulk_wait(int pending, int line) {
  Worker* w = worker_or_die("cp.async.bulk.wait_group");
  Fiber* self = w->current;
  const long complete_below = self->bulk_committed - pending;
  size_t kept = 0;
  for (size_t i = 0; i < self->bulk.size(); ++i) {
    const BulkStore store = self->bulk[i];
    if (store.group < 0 || store.group >= complete_below) {
      self->bulk[kept++] = store;
      continue;
    }
    const uintptr_t base = (uintptr_t)tile_simt_shared_base;
    if (w->checked_serial == w->block_serial && base && (uintptr_t)store.src - base < tile_simt_shared_bytes) {
      // under access checks the copy's read of its source is this thread's read of the box's bytes
      unsigned long long bytes = store.map.elem_bytes;
      for (int d = 0; d < store.rank; ++d) {
        const unsigned es = d == 0 || !store.map.element_stride[d] ? 1 : store.map.element_stride[d];
        bytes *= (store.map.box_dim[d] + es - 1) / es;
      }
      check_shared(w, self, (uintptr_t)store.src - base, (size_t)bytes, false, nullptr, store.line);
    }
    char error[kMessage] = {0};
    const unsigned char* view = w->async_view.empty() ? nullptr : w->async_view.data();
    const int status = tma_store(store.map, store.src, store.coords, store.rank, tile_simt_shared_base,
                                 tile_simt_shared_bytes, view, error, sizeof error);
    if (status != TILE_SIMT_OK) fault_block(w, status, std::string(error) + at_line(store.line ? store.line : line));
  }
  self->bulk.resize(kept);
}

void tile_simt_wgmma(int kind, float* d, const void* a, unsigned long long desc_a, unsigned long long desc_b, int trans_a,
                     int trans_b, int scale_d, int line) {
  Worker* w = worker_or_die("wgmma.mma_async");
  Warpgroup& wg = warpgroup_of(w, "wgmma.mma_async", line);
  const unsigned t = w->current->info.linear % 128;
  const long number = wg.issued[t]++;
  if (number < wg.base)
    fault_block(w, TILE_SIMT_DIVERGENCE, "wgmma: threads of one warpgroup issued different numbers of wgmma" + at_line(line));
  const size_t index = (size_t)(number - wg.base);
  if (index == wg.ops.size()) {
    wg.ops.emplace_back();
    WgmmaOp& op = wg.ops.back();
    op.kind = kind;
    op.desc_a = desc_a;
    op.desc_b = desc_b;
    op.trans_a = trans_a;
    op.trans_b = trans_b;
    op.scale_d = scale_d;
    op.line = line;
  }
  WgmmaOp& op = wg.ops[index];
  if (op.kind != kind || op.desc_b != desc_b || op.trans_a != trans_a || op.trans_b != trans_b ||
      op.scale_d != scale_d || (!(kind & TILE_SIMT_WGMMA_RS) && op.desc_a != desc_a))
    fault_block(w, TILE_SIMT_DIVERGENCE,
                "wgmma: threads of one warpgroup issued different wgmma (shape, descriptors or scale-d) as their op " +
                    std::to_string(number) + ": line " + std::to_string(op.line) + " and" + at_line(line));
  op.d[t] = d;
  op.a[t] = a;
}

void tile_simt_wgmma_commit(int line) {
  Worker* w = worker_or_die("wgmma.commit_group");
  Warpgroup& wg = warpgroup_of(w, "wgmma.commit_group", line);
  const unsigned t = w->current->info.linear % 128;
  const long group = wg.commits[t]++;
  if ((size_t)group == wg.group_end.size()) wg.group_end.push_back(wg.issued[t]);
  else if (wg.group_end[(size_t)group] != wg.issued[t])
    fault_block(w, TILE_SIMT_DIVERGENCE,
                "wgmma.commit_group: threads of one warpgroup committed different wgmma into group " +
                    std::to_string(group) + at_line(line));
}

void tile_simt_wgmma_wait(int pending, int line) {
  Worker* w = worker_or_die("wgmma.wait_group");
  Warpgroup& wg = warpgroup_of(w, "wgmma.wait_group", line);
  Fiber* self = w->current;
  if (wg.arrived == 0) {
    wg.wait_pending = pending;
    wg.line = line;
  } else if (wg.wait_pending != pending) {
    fault_block(w, TILE_SIMT_DIVERGENCE,
                "wgmma.wait_group: threads of one warpgroup wait for different group counts (line " +
                    std::to_string(wg.line) + " and" + at_line(line) + ")");
  }
  ++wg.arrived;
  if (wg.arrived < 128) {
    self->state = State::kWarpgroup;
    self->wait_line = line;
    wg.waiters.push_back(self->info.linear);
    run_next(w);
    return;
  }
  wg.arrived = 0;
  const long commits = wg.commits[0];
  for (unsigned t = 1; t < 128; ++t)
    if (wg.commits[t] != commits)
      fault_block(w, TILE_SIMT_DIVERGENCE,
                  "wgmma.wait_group: threads of one warpgroup committed different numbers of groups" + at_line(line));
  if (commits - pending > wg.done_groups) run_wgmma_groups(w, wg, commits - pending);
  rendezvous(w, wg.waiters, self->info.linear);
  push_ready_all(w, wg.waiters);
}

int tile_simt_launch(const tile_simt_launch_desc* desc, char* error, unsigned long error_size) {
  auto report = [&](int status, const std::string& text) {
    if (error && error_size) snprintf(error, error_size, "%s", text.c_str());
    return status;
  };
  // any power of two a 64-bit member mask covers: 32 (NVIDIA), 64 (AMD wave64), a vendor's 8 or 16
  if (desc->warp_size < 8 || desc->warp_size > 64 || (desc->warp_size & (desc->warp_size - 1)))
    return report(TILE_SIMT_LAUNCH,
                  "the warp size must be 8, 16, 32 or 64, not " + std::to_string(desc->warp_size));
  const unsigned long long threads = (unsigned long long)desc->block[0] * desc->block[1] * desc->block[2];
  if (threads == 0 || threads > kMaxThreads)
    return report(TILE_SIMT_LAUNCH, "a block has " + std::to_string(threads) + " threads; 1 to 1024 can run");
  const unsigned long long blocks = (unsigned long long)desc->grid[0] * desc->grid[1] * desc->grid[2];
  if (blocks == 0) return TILE_SIMT_OK;
  Launch launch;
  launch.desc = desc;
  launch.tensors.swap(staged_tensors);
  launch.threads = (unsigned)threads;
  launch.blocks = blocks;
  unsigned workers = desc->workers ? desc->workers : std::max(1u, std::thread::hardware_concurrency());
  if ((unsigned long long)workers > blocks) workers = (unsigned)blocks;
  install_fault_handlers();
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < workers; ++i) pool.emplace_back(worker_loop, &launch);
  worker_loop(&launch);  // the calling thread is worker 0
  for (auto& thread : pool) thread.join();
  return report(launch.status, launch.message);
}

}  // extern "C"
