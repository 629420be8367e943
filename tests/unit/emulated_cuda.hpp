// Runs CUDA kernel source as host C++, each CUDA thread a fiber (Boost.Context,
// with its own stack) on the calling host thread, so kernels
// written against this subset can be tested on a machine without a GPU
// (CI). Include it before the kernel header, in a file compiled by the host
// compiler with the CUDA headers on the include path.
//
// What it models:
//  - threadIdx / blockIdx / gridDim / blockDim (2-D grids and blocks), one
//    block at a time, in a shuffled order (launch(), below); warps are formed
//    from the linear thread index, x fastest;
//  - __syncthreads (a barrier over the block), __syncwarp (over the warp),
//    __shfl_xor_sync (through a per-warp exchange slot and a barrier),
//    atomicAdd on unsigned, __threadfence and __ldcg (trivially: blocks run one
//    after another, so a "last block to arrive" sees every other block's
//    writes).
//    A thread runs until it waits at a barrier, then the next one runs: a
//    missing barrier lets one thread run ahead and read what the others
//    have not written yet (0xFF, below) or overwrite what they have not
//    read, every time, not by chance. Threads that all wait at barriers
//    that can never complete (a barrier some threads skip) fail the launch
//    instead of hanging;
//  - dynamic shared memory (dynamic_smem(), for kernel headers that get it
//    through that function): filled with 0xFF (NaN as fp32 and bf16) before
//    each block, so a read of anything the block did not write poisons
//    results, and checked after each block for writes past the launch's
//    size; static __shared__ arrays become function statics (one block
//    runs at a time, so the block's threads share them);
//  - mma.sync.m16n8k16 bf16 (mma_m16n8k16_bf16, which model/cuda/mma_bf16.cuh
//    calls in place of its inline PTX): a warp-collective product over the
//    lanes' registers in the PTX ISA's fragment layout; ldmatrix.m8n8.x4
//    (.trans) likewise, checking that every row address is 16-byte aligned
//    and in shared memory;
//  - cp.async (commit/wait_group): the destination is NaN (0xFF) from issue
//    and the copy lands at the wait that covers it, so both a read too early
//    and an overwrite while another warp still reads show; a launch fails if
//    a thread ends with copies it never waited for; their stores' bank
//    conflicts are counted (CpAsyncStats);
//  - launch_kernel (the CUDA backend's launches): the grid and block limits
//    every GPU has; more than 48 KiB of dynamic shared memory needs the
//    kernel's cudaFuncSetAttribute opt-in; each launch's block size and
//    dynamic shared memory are recorded (host_cuda/launch_log.hpp) for the
//    check against ptxas's register and shared memory counts;
//    the kernel is queued on its stream and runs when the host CUDA
//    runtime's stream order (host_cuda/host_streams.cpp) gets to it.
// What it does not: timing, occupancy and register limits (checked from
// ptxas's counts: scripts/kernel_resources.py), bank conflicts other than
// ldmatrix's (LdmatrixStats) and cp.async's stores (CpAsyncStats),
// concurrent kernels (one runs at a time).
#pragma once

// The CUDA headers first: with a host compiler they define __device__,
// __shared__ and friends (mostly as nothing); their include guards keep them
// from redefining ours below when a kernel header includes them again.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include "host_cuda/host_streams.hpp"
#include "host_cuda/api_log.hpp"
#include "host_cuda/launch_log.hpp"

// The CUDA headers define some of these for host compilers; ours win.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __align__
#undef __grid_constant__
#define GPT_EMULATED_CUDA 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

inline uint3 threadIdx;  // the running fiber's, set by the scheduler
inline dim3 blockIdx, gridDim, blockDim;

namespace emulated_cuda {

inline unsigned t_linear_tid;  // threadIdx.x + threadIdx.y * blockDim.x: warps by this

constexpr size_t kSmemCapacity = 228 * 1024;  // an H100 SM's shared memory
alignas(128) inline unsigned char g_smem[kSmemCapacity];
// g_smem[g_smem_dirty, kSmemCapacity) is known to hold 0xFF: each block's
// end checks the bytes past its launch's size, so the next block refills
// only what a block may have written. (A small kernel's 512 blocks each
// refilled and byte-scanned all 228 KiB: an emulated tiny training step
// took 2.18 s with that, 1.26 s without.)
inline size_t g_smem_dirty = kSmemCapacity;  // g_smem starts zeroed

// The first byte of g_smem at or past `from` that is not 0xFF, or
// kSmemCapacity: 64 bytes at a time (the compiler vectorises the AND).
inline size_t first_smem_write(size_t from) {
  size_t i = from;
  for (; i < kSmemCapacity && i % 64 != 0; ++i)
    if (g_smem[i] != 0xFF) return i;
  for (; i < kSmemCapacity; i += 64) {
    uint64_t all = ~uint64_t(0);
    for (size_t w = 0; w < 8; ++w) {
      uint64_t v;
      std::memcpy(&v, g_smem + i + 8 * w, 8);
      all &= v;
    }
    if (all != ~uint64_t(0))
      for (size_t j = i;; ++j)
        if (g_smem[j] != 0xFF) return j;
  }
  return kSmemCapacity;
}

[[noreturn]] inline void fail(const std::string& what) { throw std::logic_error("emulated CUDA: " + what); }

// cp.async: a thread's copies, the source read at issue (global memory does
// not change during a kernel here), written at the wait that covers their
// group.
struct PendingCopy {
  unsigned char* dst;
  unsigned char bytes[16];
};

// A CUDA thread: a fiber (Boost.Context) on a stack with a guard page, so an
// overflow faults instead of corrupting the next stack. Fibers are made once
// and serve every later launch and block.
struct Fiber {
  static constexpr size_t kStackBytes = 256 * 1024;
  boost::context::fiber context;  // this thread, while suspended
  uint3 idx;
  unsigned linear = 0;
  bool done = true;
  std::vector<PendingCopy> open_group;
  std::vector<std::vector<PendingCopy>> groups;
  unsigned copies_issued = 0;  // this block: the n-th cp.async of this thread
  unsigned collectives = 0;    // this block: the n-th warp collective of this thread
};

// A barrier over `expected` fibers: the last to arrive completes the phase,
// makes the waiting ones ready again and goes on.
struct Barrier {
  unsigned expected = 0;
  std::vector<unsigned> waiting;
};

struct MmaSlot {
  uint32_t a[4], b[2];
  const unsigned char* row;  // ldmatrix
};
struct BlockState {
  explicit BlockState(int threads) : threads(unsigned(threads)), shfl(2 * size_t(threads)), mma(2 * size_t(threads)) {
    block.expected = unsigned(threads);
    // The last warp of a block that is not a multiple of 32 is partial.
    for (int w = 0; w * 32 < threads; ++w) warps.push_back(Barrier{unsigned(std::min(32, threads - 32 * w)), {}});
  }
  unsigned threads;
  Barrier block;
  std::vector<Barrier> warps;
  // The warp collectives' exchange slots, two per thread: the n-th
  // collective of a warp posts to set n % 2 and waits once, for the whole
  // warp to post. A lane that runs ahead to the (n+1)-th posts to the other
  // set, and one at the (n+2)-th has passed the (n+1)-th's wait, which every
  // lane reached after reading the n-th's: no slot is overwritten before all
  // have read it, without a second wait (half the thread switches).
  std::vector<float> shfl;
  std::vector<MmaSlot> mma;
  // Every cp.async destination of the block: which thread, its how-manieth
  // copy, the shared-memory offset (bank conflicts, counted at the block's end).
  struct CopyStore {
    unsigned thread, seq, offset;
  };
  std::vector<CopyStore> copy_stores;
};

// The threads of a block that can run (not waiting at a barrier, not
// finished), as a bitmap: the scheduler resumes the lowest or the highest.
class ReadySet {
 public:
  void fill(unsigned n) {
    for (unsigned w = 0; w < 16; ++w)
      bits_[w] = n >= 64 * (w + 1) ? ~uint64_t(0) : n > 64 * w ? (uint64_t(1) << (n - 64 * w)) - 1 : 0;
  }
  void set(unsigned t) { bits_[t / 64] |= uint64_t(1) << (t % 64); }
  void clear(unsigned t) { bits_[t / 64] &= ~(uint64_t(1) << (t % 64)); }
  int lowest() const {
    for (unsigned w = 0; w < 16; ++w)
      if (bits_[w]) return int(64 * w + unsigned(__builtin_ctzll(bits_[w])));
    return -1;
  }
  int highest() const {
    for (unsigned w = 16; w-- > 0;)
      if (bits_[w]) return int(64 * w + 63 - unsigned(__builtin_clzll(bits_[w])));
    return -1;
  }

 private:
  uint64_t bits_[16] = {};  // 1024 threads
};

struct Scheduler {
  std::vector<std::unique_ptr<Fiber>> fibers;  // grows to the largest block seen
  Fiber* running = nullptr;
  BlockState* block = nullptr;
  const std::function<void()>* body = nullptr;
  ReadySet ready;
  bool lowest_first = true;     // which ready thread runs next, this block
  boost::context::fiber launch;  // launch()'s loop, while a thread runs
};
// Per host thread: the thread that makes a stream's work run runs its
// kernels (the MPI communicator's progress thread too), and fibers stay on
// the thread that made them. Launches never overlap (host_streams.cpp runs
// work under one lock), so the globals above are shared.
inline thread_local Scheduler g_sched;
// This host thread's g_sched while it runs a launch (set by launch()): every
// access to g_sched calls the wrapper that constructs it on first use (5% of
// an emulated step's profile samples), a constinit pointer's does not.
inline constinit thread_local Scheduler* t_sched = nullptr;

inline BlockState& block_state() { return *t_sched->block; }
inline Fiber& this_thread() { return *t_sched->running; }
// The thread that runs next: the lowest- or highest-numbered ready one, as
// the block's order says; -1 when every thread waits or has finished.
inline int next_ready() { return t_sched->lowest_first ? t_sched->ready.lowest() : t_sched->ready.highest(); }
// Switches to `to`, leaving the running context's continuation in *from.
inline void switch_to(boost::context::fiber& to, boost::context::fiber* from) {
  std::move(to).resume_with([from](boost::context::fiber&& caller) {
    *from = std::move(caller);
    return boost::context::fiber{};
  });
}
// Makes f the running thread and switches to it from the context whose
// continuation goes to *from.
inline void run_thread(Fiber& f, boost::context::fiber* from) {
  threadIdx = f.idx;
  t_linear_tid = f.linear;
  t_sched->running = &f;
  switch_to(f.context, from);
}
// The running thread suspends and the next ready one runs, or, with none,
// launch()'s loop: one switch per suspension, where a return to the loop
// made it two (the switches were 42% of an emulated step's profile samples;
// the step went from 1.24 to 1.01 s). The order is the loop's, unchanged.
inline void yield() {
  Fiber& f = this_thread();
  if (const int next = next_ready(); next >= 0) return run_thread(*t_sched->fibers[size_t(next)], &f.context);
  switch_to(t_sched->launch, &f.context);
}

inline void arrive_and_wait(Barrier& b) {
  if (b.waiting.size() + 1 == b.expected) {
    for (unsigned t : b.waiting) t_sched->ready.set(t);
    b.waiting.clear();
    return;
  }
  b.waiting.push_back(t_linear_tid);
  t_sched->ready.clear(t_linear_tid);
  yield();  // back when the last one arrives
}
inline Barrier& warp_barrier() { return block_state().warps[t_linear_tid / 32]; }
// The first slot of the running thread's warp in the set its next warp
// collective uses (BlockState's slots). A collective needs the whole warp.
inline unsigned collective_warp0(const char* what) {
  if (t_linear_tid / 32 * 32 + 32 > block_state().threads) fail(std::string(what) + " in a partial warp");
  const unsigned set = this_thread().collectives++ % 2;
  return set * block_state().threads + t_linear_tid / 32 * 32;
}

// The rule of ldmatrix rows and cp.async destinations: 16-byte aligned, and
// all 16 bytes in the launch's shared memory.
inline void require_shared16(const unsigned char* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) fail(std::string(what) + " not 16-byte aligned");
  if (p < g_smem || p + 16 > g_smem + kSmemCapacity) fail(std::string(what) + " outside shared memory");
}

// Shared memory bank conflicts of cp.async's 16-byte stores, counted over
// every launch since the last reset_cp_async_stats(). The n-th copies of a
// warp's threads are one instruction (the kernels' copy loops are uniform
// across a warp; a lane that skips a copy says so, cp_async_zero_16); a
// 16-byte access is served a quarter warp (8 lanes, 128 bytes) per
// wavefront, conflict-free when the quarter's distinct destinations fall on
// distinct 4-bank groups ((offset / 16) mod 8), else in as many wavefronts
// as the most crowded group holds.
struct CpAsyncStats {
  uint64_t requests = 0;          // quarter-warp store requests
  uint64_t extra_wavefronts = 0;  // wavefronts beyond one per request
};
inline CpAsyncStats g_cp_async_stats;
inline void reset_cp_async_stats() { g_cp_async_stats = {}; }
inline void count_cp_async_conflicts(std::vector<BlockState::CopyStore>& stores) {
  std::sort(stores.begin(), stores.end(), [](const auto& a, const auto& b) {
    return std::tuple(a.thread / 8, a.seq, a.thread) < std::tuple(b.thread / 8, b.seq, b.thread);
  });
  for (size_t i = 0; i < stores.size();) {
    size_t j = i;
    int in_group[8] = {};
    while (j < stores.size() && stores[j].thread / 8 == stores[i].thread / 8 && stores[j].seq == stores[i].seq) {
      bool repeat = false;  // the same destination twice is one access
      for (size_t q = i; q < j; ++q) repeat = repeat || stores[q].offset / 16 == stores[j].offset / 16;
      if (!repeat) ++in_group[stores[j].offset / 16 % 8];
      ++j;
    }
    g_cp_async_stats.requests += 1;
    g_cp_async_stats.extra_wavefronts += uint64_t(*std::max_element(in_group, in_group + 8) - 1);
    i = j;
  }
  stores.clear();
}

// A fiber runs the body once per block: after each, it reports done and
// waits for the scheduler to start it on the next block. A rule broken in
// any thread (an exception) aborts the process with its message, as a
// kernel fault ends a CUDA program.
inline void fiber_main(Fiber& f) {
  for (;;) {
    try {
      (*t_sched->body)();
      if (!f.open_group.empty() || !f.groups.empty()) fail("cp.async copies never waited for");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s (block %u,%u thread %u)\n", e.what(), blockIdx.x, blockIdx.y, f.linear);
      std::abort();
    }
    f.done = true;
    t_sched->ready.clear(f.linear);
    yield();
  }
}

inline std::unique_ptr<Fiber> make_fiber() {
  auto f = std::make_unique<Fiber>();
  Fiber* self = f.get();
  f->context = boost::context::fiber(std::allocator_arg, boost::context::protected_fixedsize_stack(Fiber::kStackBytes),
                                     [self](boost::context::fiber&&) {
                                       fiber_main(*self);  // never returns
                                       return boost::context::fiber{};
                                     });
  return f;
}

// Launches so far: seeds each launch's block order.
inline unsigned g_launches = 0;

// Runs body() as grid x block CUDA threads with smem_bytes of dynamic
// shared memory, one block at a time, the blocks in an order shuffled
// afresh for each launch (seeded by the launch count, so a run repeats
// exactly): a GPU promises no order, so a kernel that depends on one (that
// takes the highest-numbered block to be the last to arrive, or reads what
// an earlier block wrote without synchronising) fails here instead of
// passing by the luck of a fixed order. Within a block the scheduler resumes
// the lowest-numbered thread that can run in even blocks, the highest in odd
// ones, so one end of the block runs as far ahead of the other as the
// barriers allow, in both directions: a missing barrier shows as a read of
// data not yet written, or an overwrite of data not yet read, on every run.
// Threads left waiting with none able to run are waiting at a barrier some
// thread never reaches: the launch fails.
template <typename Body>
void launch(dim3 grid, dim3 block, size_t smem_bytes, Body body) {
  const int threads = int(block.x * block.y * block.z);
  if (block.z != 1 || grid.z != 1) fail("3-D grids and blocks are not modelled");
  if (threads < 1 || threads > 1024) fail("block size must be 1 to 1024 threads");
  if (smem_bytes > kSmemCapacity) fail("more dynamic shared memory than an SM has");
  t_sched = &g_sched;
  if (t_sched->body) fail("a launch inside a launch");
  gridDim = grid;
  blockDim = block;
  const std::function<void()> run = body;
  BlockState state(threads);
  t_sched->body = &run;
  t_sched->block = &state;
  auto& fibers = t_sched->fibers;
  while (int(fibers.size()) < threads) fibers.push_back(make_fiber());
  for (int t = 0; t < threads; ++t) {
    fibers[size_t(t)]->idx = make_uint3(unsigned(t) % block.x, unsigned(t) / block.x, 0);
    fibers[size_t(t)]->linear = unsigned(t);
  }
  std::vector<unsigned> order(size_t(grid.x) * grid.y);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(0x9e3779b9u + g_launches++));
  for (unsigned k = 0; k < grid.x * grid.y; ++k) {
    blockIdx = dim3(order[k] % grid.x, order[k] / grid.x);
    std::memset(g_smem, 0xFF, g_smem_dirty);
    for (int t = 0; t < threads; ++t) {
      Fiber& f = *fibers[size_t(t)];
      f.done = false, f.copies_issued = 0, f.collectives = 0;
    }
    t_sched->ready.fill(unsigned(threads));
    t_sched->lowest_first = k % 2 == 0;
    run_thread(*fibers[size_t(next_ready())], &t_sched->launch);  // back when no thread can run
    int waiting = 0;
    for (int t = 0; t < threads; ++t) waiting += !fibers[size_t(t)]->done;
    if (waiting > 0) {
      std::fprintf(stderr, "emulated CUDA: %d threads of block %u,%u wait at barriers that never complete "
                   "(a barrier not every thread reaches)\n", waiting, blockIdx.x, blockIdx.y);
      std::abort();
    }
    count_cp_async_conflicts(state.copy_stores);
    if (const size_t i = first_smem_write(smem_bytes); i < kSmemCapacity) {
      std::fprintf(stderr, "emulated CUDA: shared memory written at byte %zu, past the launch's %zu (block %u,%u)\n", i,
                   smem_bytes, blockIdx.x, blockIdx.y);
      std::abort();
    }
    g_smem_dirty = smem_bytes;
  }
  t_sched->body = nullptr;
  t_sched->block = nullptr;
  t_sched->running = nullptr;
}

template <typename Body>
void launch(dim3 grid, int threads, size_t smem_bytes, Body body) {
  launch(grid, dim3(unsigned(threads)), smem_bytes, body);
}

// The dynamic shared memory each kernel opted into with
// cudaFuncSetAttribute(kMaxDynamicSharedMemorySize) (the host runtime,
// tests/unit/host_cuda, records it here).
inline std::map<const void*, size_t> g_smem_opt_in;

// A launch by the CUDA backend's launch_kernel (model/cuda/launch.cuh): as
// on the GPU, more than 48 KiB of dynamic shared memory needs the kernel's
// opt-in, checked at the launch; the kernel runs as `stream`'s next
// operation (host_cuda/host_streams.cpp), with the arguments it was
// launched with.
// Never inlined: the allocation audit (tests/alloc_audit.sh) tells the
// emulator's allocations from the product's by this frame on their stacks.
template <typename Body>
__attribute__((noinline)) void launch_kernel(const void* kernel, dim3 grid, dim3 block, size_t smem_bytes,
                                             cudaStream_t stream, Body body) {
  // The GPU refuses these configurations (cudaErrorInvalidConfiguration),
  // whatever the kernel: block dimensions up to 1024 x 1024 x 64 and 1024
  // threads in all, grid dimensions up to 2^31 - 1 x 65535 x 65535, none 0.
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
    std::fprintf(stderr, "emulated CUDA: an invalid launch configuration: grid (%u, %u, %u), block (%u, %u, %u)\n",
                 grid.x, grid.y, grid.z, block.x, block.y, block.z);
    std::abort();
  }
  constexpr size_t kDefaultSmem = 48 * 1024;
  const auto opt_in = g_smem_opt_in.find(kernel);
  host_cuda::count_call("launch");
  host_cuda::record_launch(kernel, unsigned(threads), smem_bytes, opt_in == g_smem_opt_in.end() ? 0 : opt_in->second);
  if (smem_bytes > kDefaultSmem && (opt_in == g_smem_opt_in.end() || smem_bytes > opt_in->second)) {
    std::fprintf(stderr, "emulated CUDA: a launch with %zu bytes of dynamic shared memory, more than 48 KiB, "
                 "without the kernel's cudaFuncSetAttribute opt-in\n", smem_bytes);
    std::abort();
  }
  host_cuda::enqueue(stream, [=] { launch(grid, block, smem_bytes, body); });
}

}  // namespace emulated_cuda

inline void __syncthreads() { emulated_cuda::arrive_and_wait(emulated_cuda::block_state().block); }
inline void __syncwarp(unsigned = 0xffffffffu) { emulated_cuda::arrive_and_wait(emulated_cuda::warp_barrier()); }
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  auto& slots = emulated_cuda::block_state().shfl;
  const unsigned lane = emulated_cuda::t_linear_tid % 32, warp0 = emulated_cuda::collective_warp0("__shfl_xor_sync");
  slots[warp0 + lane] = v;
  emulated_cuda::arrive_and_wait(emulated_cuda::warp_barrier());
  return slots[warp0 + (lane ^ unsigned(lane_mask))];
}
inline unsigned char* dynamic_smem() { return emulated_cuda::g_smem; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
[[noreturn]] inline void __trap() { emulated_cuda::fail("__trap"); }
// One block runs at a time, its threads on one host thread: every access is
// atomic and visible to the blocks after it.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
inline void __threadfence() {}
// An L2 (cache-global) load: here every store is visible to the loads after it.
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}

namespace emulated_cuda {

// mma.sync.m16n8k16 (bf16 in, fp32 accumulation), collective over the warp:
// every lane posts its registers, each lane rebuilds the 16x16 A and 16x8 B
// tiles from all 32 lanes by the PTX ISA's fragment layout (the one
// lib/model/cuda/mma_bf16.cuh documents) and computes its own 4 outputs. A
// kernel that places values by another layout gets a wrong product here,
// as it would on the GPU.
inline float bf16_half(uint32_t reg, int half) {
  const uint32_t bits = half ? reg >> 16 : reg & 0xFFFFu;
  float f;
  const uint32_t widened = bits << 16;
  std::memcpy(&f, &widened, 4);
  return f;
}
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  auto& slots = block_state().mma;
  const unsigned me = t_linear_tid, warp0 = collective_warp0("mma.sync");
  MmaSlot& mine = slots[warp0 + me % 32];
  std::memcpy(mine.a, a, sizeof a);
  std::memcpy(mine.b, b, sizeof b);
  arrive_and_wait(warp_barrier());
  // A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k % 2.
  auto A = [&](int r, int k) {
    return bf16_half(slots[warp0 + (r % 8) * 4 + (k % 8) / 2].a[(r >= 8) + 2 * (k >= 8)], k % 2);
  };
  // B[k][n]: lane n * 4 + (k % 8) / 2, register k >= 8, half k % 2.
  auto B = [&](int k, int n) { return bf16_half(slots[warp0 + n * 4 + (k % 8) / 2].b[k >= 8], k % 2); };
  const int g = int(me % 32) / 4, t = int(me % 4);
  for (int e = 0; e < 4; ++e) {  // d is this lane's own: the other lanes read the slots
    const int r = g + 8 * (e / 2), n = 2 * t + e % 2;
    float s = d[e];
    for (int k = 0; k < 16; ++k) s += A(r, k) * B(k, n);
    d[e] = s;
  }
}

// Shared memory bank conflicts of ldmatrix, counted over every launch since
// the last reset_ldmatrix_stats(). Each of an x4's four 8 x 8 matrices is
// one pass over 32 banks of 4 bytes: its 8 row addresses (16 bytes each)
// are served in one wavefront when they fall on distinct 4-bank groups
// ((address / 16) mod 8, the dynamic shared memory starting 128-byte
// aligned), else in as many as the most crowded group holds distinct rows.
struct LdmatrixStats {
  uint64_t matrices = 0;           // 8 x 8 matrices loaded
  uint64_t extra_wavefronts = 0;   // wavefronts beyond one per matrix
};
inline LdmatrixStats g_ldmatrix_stats;
inline void reset_ldmatrix_stats() { g_ldmatrix_stats = {}; }


// ldmatrix.m8n8.x4 (.trans) b16, collective over the warp: lane 8i + r
// gives the address of row r of matrix i, which must be 16-byte aligned and
// lie in the launch's shared memory; lane (g, t) gets elements (g, 2t),
// (g, 2t + 1) of matrix i in r[i], or with trans (2t, g), (2t + 1, g).
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  auto& slots = block_state().mma;
  const unsigned me = t_linear_tid, warp0 = collective_warp0("ldmatrix");
  const auto* p = static_cast<const unsigned char*>(row);
  require_shared16(p, "ldmatrix row address");
  slots[warp0 + me % 32].row = p;
  arrive_and_wait(warp_barrier());
  if (me % 32 == 0) {  // the warp's instruction, counted once
    for (int i = 0; i < 4; ++i) {
      int rows_in_group[8] = {};
      for (int rr = 0; rr < 8; ++rr) {
        const unsigned char* a = slots[warp0 + 8 * i + rr].row;
        bool repeat = false;  // the same row twice is one read (a broadcast)
        for (int q = 0; q < rr; ++q) repeat = repeat || slots[warp0 + 8 * i + q].row == a;
        if (!repeat) ++rows_in_group[(a - g_smem) / 16 % 8];
      }
      g_ldmatrix_stats.matrices += 1;
      g_ldmatrix_stats.extra_wavefronts += uint64_t(*std::max_element(rows_in_group, rows_in_group + 8) - 1);
    }
  }
  const int g = int(me % 32) / 4, t = int(me % 4);
  auto element = [&](int matrix, int rr, int c) {
    uint16_t v;
    std::memcpy(&v, slots[warp0 + 8 * matrix + rr].row + 2 * c, 2);
    return uint32_t(v);
  };
  for (int i = 0; i < 4; ++i)
    r[i] = trans ? element(i, 2 * t, g) | element(i, 2 * t + 1, g) << 16
                 : element(i, g, 2 * t) | element(i, g, 2 * t + 1) << 16;
}

inline void cp_async_16(void* dst, const void* src) {
  auto* d = static_cast<unsigned char*>(dst);
  require_shared16(d, "cp.async destination");
  if (reinterpret_cast<uintptr_t>(src) % 16 != 0) fail("cp.async source not 16-byte aligned");
  PendingCopy c{d, {}};
  std::memcpy(c.bytes, src, 16);
  block_state().copy_stores.push_back({t_linear_tid, this_thread().copies_issued++, unsigned(d - g_smem)});
  std::memset(d, 0xFF, 16);  // undefined until the wait: a read before it gets NaN
  this_thread().open_group.push_back(c);
}
// A lane's skipped copy (cp_async.cuh cp_async_zero_16): an ordinary store
// that takes the place of the thread's next copy in the count.
inline void cp_async_zero_16(void* dst) {
  require_shared16(static_cast<unsigned char*>(dst), "cp.async destination");  // the copy's own rule
  std::memset(dst, 0, 16);
  ++this_thread().copies_issued;
}
inline void cp_async_commit() {
  Fiber& f = this_thread();
  f.groups.push_back(std::move(f.open_group));
  f.open_group.clear();
}
inline void cp_async_wait(int n) {
  auto& groups = this_thread().groups;
  while (int(groups.size()) > n) {
    for (const PendingCopy& c : groups.front()) std::memcpy(c.dst, c.bytes, 16);
    groups.erase(groups.begin());
  }
}

}  // namespace emulated_cuda
