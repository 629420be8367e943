// Runs CUDA kernel source as host C++, one std::thread per CUDA thread, so
// kernels written against this subset can be tested on a machine without a
// GPU (CI). Include it before the kernel header, in a file compiled by the
// host compiler with the CUDA headers on the include path.
//
// What it models:
//  - threadIdx / blockIdx / gridDim / blockDim (2-D grids and blocks), one
//    block at a time; warps are formed from the linear thread index, x fastest;
//  - __syncthreads (a barrier over the block), __syncwarp (over the warp),
//    __shfl_xor_sync (through a per-warp exchange slot and two barriers);
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
//  - cp.async (commit/wait_group): copies held back until the wait that
//    covers them, and a launch fails if a thread ends with copies it never
//    waited for.
// What it does not: timing, occupancy, register limits, bank conflicts, the
// launch's shared-memory limit.
#pragma once

// The CUDA headers first: with a host compiler they define __device__,
// __shared__ and friends (mostly as nothing); their include guards keep them
// from redefining ours below when a kernel header includes them again.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// The CUDA headers define some of these for host compilers; ours win.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __align__
#define GPT_EMULATED_CUDA 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

inline thread_local uint3 threadIdx;
inline dim3 blockIdx, gridDim, blockDim;

namespace emulated_cuda {

inline thread_local unsigned t_linear_tid;  // threadIdx.x + threadIdx.y * blockDim.x: warps by this

constexpr size_t kSmemCapacity = 228 * 1024;  // an H100 SM's shared memory
alignas(128) inline unsigned char g_smem[kSmemCapacity];

struct MmaSlot {
  uint32_t a[4], b[2];
  const unsigned char* row;  // ldmatrix
};
struct BlockState {
  explicit BlockState(int threads) : block(threads), shfl(size_t(threads)), mma(size_t(threads)) {
    // The last warp of a block that is not a multiple of 32 is partial.
    for (int w = 0; w * 32 < threads; ++w)
      warps.push_back(std::make_unique<std::barrier<>>(std::min(32, threads - 32 * w)));
  }
  std::barrier<> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> shfl;
  std::vector<MmaSlot> mma;
};
inline BlockState* g_block = nullptr;

// cp.async: this thread's copies, the source read at issue (global memory
// does not change during a kernel here), written at the wait that covers
// their group.
struct PendingCopy {
  unsigned char* dst;
  unsigned char bytes[16];
};
inline thread_local std::vector<PendingCopy> t_open_group;
inline thread_local std::vector<std::vector<PendingCopy>> t_groups;

inline std::barrier<>& warp_barrier() { return *g_block->warps[t_linear_tid / 32]; }

[[noreturn]] inline void fail(const std::string& what) { throw std::logic_error("emulated CUDA: " + what); }

// The rule of ldmatrix rows and cp.async destinations: 16-byte aligned, and
// all 16 bytes in the launch's shared memory.
inline void require_shared16(const unsigned char* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) fail(std::string(what) + " not 16-byte aligned");
  if (p < g_smem || p + 16 > g_smem + kSmemCapacity) fail(std::string(what) + " outside shared memory");
}

// Runs body() as grid x threads CUDA threads with smem_bytes of dynamic
// shared memory, one block at a time on `threads` host threads that the
// launch starts once and reuses for every block (starting them per block
// cost ~65 us each). A rule broken in any thread (an exception) aborts the
// process with its message: the block's other threads would otherwise wait
// at the next barrier for ever.
template <typename Body>
void launch(dim3 grid, dim3 block, size_t smem_bytes, Body body) {
  const int threads = int(block.x * block.y * block.z);
  if (block.z != 1 || grid.z != 1) fail("3-D grids and blocks are not modelled");
  if (threads < 1 || threads > 1024) fail("block size must be 1 to 1024 threads");
  if (smem_bytes > kSmemCapacity) fail("more dynamic shared memory than an SM has");
  gridDim = grid;
  blockDim = block;
  const unsigned blocks = grid.x * grid.y;
  // The launching thread sets a block up between `start` and its release,
  // and checks it after `done`; the workers run body() in between. The
  // block's barriers and exchange slots serve every block: each barrier's
  // phases complete within a block, and slots are written before read.
  std::barrier<> start(threads + 1), done(threads + 1);
  BlockState state(threads);
  g_block = &state;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      threadIdx = make_uint3(unsigned(t) % block.x, unsigned(t) / block.x, 0);
      t_linear_tid = unsigned(t);
      for (unsigned k = 0; k < blocks; ++k) {
        start.arrive_and_wait();
        try {
          body();
          if (!t_open_group.empty() || !t_groups.empty()) fail("cp.async copies never waited for");
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s (block %u,%u thread %d)\n", e.what(), blockIdx.x, blockIdx.y, t);
          std::abort();
        }
        done.arrive_and_wait();
      }
    });
  for (unsigned k = 0; k < blocks; ++k) {
    blockIdx = dim3(k % grid.x, k / grid.x);
    std::memset(g_smem, 0xFF, kSmemCapacity);
    start.arrive_and_wait();
    done.arrive_and_wait();
    for (size_t i = smem_bytes; i < kSmemCapacity; ++i)
      if (g_smem[i] != 0xFF) {
        // The workers wait for the next block: abort, as a failing thread does.
        std::fprintf(stderr, "emulated CUDA: shared memory written at byte %zu, past the launch's %zu (block %u,%u)\n",
                     i, smem_bytes, blockIdx.x, blockIdx.y);
        std::abort();
      }
  }
  for (auto& th : pool) th.join();
  g_block = nullptr;
}

template <typename Body>
void launch(dim3 grid, int threads, size_t smem_bytes, Body body) {
  launch(grid, dim3(unsigned(threads)), smem_bytes, body);
}

}  // namespace emulated_cuda

inline void __syncthreads() { emulated_cuda::g_block->block.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emulated_cuda::warp_barrier().arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  auto& slots = emulated_cuda::g_block->shfl;
  const unsigned me = emulated_cuda::t_linear_tid, warp0 = me / 32 * 32;
  if (warp0 + 32 > blockDim.x * blockDim.y) emulated_cuda::fail("__shfl_xor_sync in a partial warp");
  slots[me] = v;
  emulated_cuda::warp_barrier().arrive_and_wait();
  const float other = slots[warp0 + ((me % 32) ^ unsigned(lane_mask))];
  emulated_cuda::warp_barrier().arrive_and_wait();  // nobody overwrites a slot before all have read
  return other;
}
inline unsigned char* dynamic_smem() { return emulated_cuda::g_smem; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
[[noreturn]] inline void __trap() { emulated_cuda::fail("__trap"); }

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
  auto& slots = g_block->mma;
  const unsigned me = t_linear_tid, warp0 = me / 32 * 32;
  MmaSlot& mine = slots[me];
  std::memcpy(mine.a, a, sizeof a);
  std::memcpy(mine.b, b, sizeof b);
  warp_barrier().arrive_and_wait();
  // A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k % 2.
  auto A = [&](int r, int k) {
    return bf16_half(slots[warp0 + (r % 8) * 4 + (k % 8) / 2].a[(r >= 8) + 2 * (k >= 8)], k % 2);
  };
  // B[k][n]: lane n * 4 + (k % 8) / 2, register k >= 8, half k % 2.
  auto B = [&](int k, int n) { return bf16_half(slots[warp0 + n * 4 + (k % 8) / 2].b[k >= 8], k % 2); };
  const int g = int(me % 32) / 4, t = int(me % 4);
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int r = g + 8 * (e / 2), n = 2 * t + e % 2;
    float s = d[e];
    for (int k = 0; k < 16; ++k) s += A(r, k) * B(k, n);
    out[e] = s;
  }
  warp_barrier().arrive_and_wait();  // nobody overwrites a slot before all have read
  std::memcpy(d, out, sizeof out);
}

// ldmatrix.m8n8.x4 (.trans) b16, collective over the warp: lane 8i + r
// gives the address of row r of matrix i, which must be 16-byte aligned and
// lie in the launch's shared memory; lane (g, t) gets elements (g, 2t),
// (g, 2t + 1) of matrix i in r[i], or with trans (2t, g), (2t + 1, g).
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  auto& slots = g_block->mma;
  const unsigned me = t_linear_tid, warp0 = me / 32 * 32;
  const auto* p = static_cast<const unsigned char*>(row);
  require_shared16(p, "ldmatrix row address");
  slots[me].row = p;
  warp_barrier().arrive_and_wait();
  const int g = int(me % 32) / 4, t = int(me % 4);
  auto element = [&](int matrix, int rr, int c) {
    uint16_t v;
    std::memcpy(&v, slots[warp0 + 8 * matrix + rr].row + 2 * c, 2);
    return uint32_t(v);
  };
  for (int i = 0; i < 4; ++i)
    r[i] = trans ? element(i, 2 * t, g) | element(i, 2 * t + 1, g) << 16
                 : element(i, g, 2 * t) | element(i, g, 2 * t + 1) << 16;
  warp_barrier().arrive_and_wait();
}

inline void cp_async_16(void* dst, const void* src) {
  auto* d = static_cast<unsigned char*>(dst);
  require_shared16(d, "cp.async destination");
  if (reinterpret_cast<uintptr_t>(src) % 16 != 0) fail("cp.async source not 16-byte aligned");
  PendingCopy c{d, {}};
  std::memcpy(c.bytes, src, 16);
  t_open_group.push_back(c);
}
inline void cp_async_commit() {
  t_groups.push_back(std::move(t_open_group));
  t_open_group.clear();
}
inline void cp_async_wait(int n) {
  while (int(t_groups.size()) > n) {
    for (const PendingCopy& c : t_groups.front()) std::memcpy(c.dst, c.bytes, 16);
    t_groups.erase(t_groups.begin());
  }
}

}  // namespace emulated_cuda
