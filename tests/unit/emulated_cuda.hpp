// Runs CUDA kernel source as host C++, one std::thread per CUDA thread, so
// kernels written against this subset can be tested on a machine without a
// GPU (CI). Include it before the kernel header, in a file compiled by the
// host compiler with the CUDA headers on the include path.
//
// What it models:
//  - threadIdx / blockIdx / gridDim / blockDim, one block at a time;
//  - __syncthreads (a barrier over the block), __syncwarp (over the warp),
//    __shfl_xor_sync (through a per-warp exchange slot and two barriers);
//  - dynamic shared memory (dynamic_smem(), for kernel headers that get it
//    through that function): filled with 0xFF (NaN as fp32 and bf16) before
//    each block, so a read of anything the block did not write poisons
//    results, and checked after each block for writes past the launch's
//    size; static __shared__ arrays become function statics (one block
//    runs at a time, so the block's threads share them);
//  - nvcuda::wmma with 16x16x16 fragments: every lane holds the whole tile
//    (loads by every lane, stores by lane 0 only, so another lane sees a
//    store only after the kernel's own __syncwarp), fp32 accumulation; each
//    load/store checks WMMA's rules: a 32-byte aligned pointer and ldm a
//    multiple of 16 bytes.
// What it does not: timing, occupancy, register limits, the real fragment
// distribution across lanes, the launch's shared-memory limit.
#pragma once

// The CUDA headers first: with a host compiler they define __device__,
// __shared__ and friends (mostly as nothing); their include guards keep them
// from redefining ours below when a kernel header includes them again.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <vector_functions.h>
#include <vector_types.h>

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
#include <type_traits>
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

constexpr size_t kSmemCapacity = 228 * 1024;  // an H100 SM's shared memory
alignas(128) inline unsigned char g_smem[kSmemCapacity];

struct BlockState {
  explicit BlockState(int threads) : block(threads), shfl(size_t(threads)) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
  }
  std::barrier<> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> shfl;
};
inline BlockState* g_block = nullptr;

inline std::barrier<>& warp_barrier() { return *g_block->warps[threadIdx.x / 32]; }

[[noreturn]] inline void fail(const std::string& what) { throw std::logic_error("emulated CUDA: " + what); }

// Runs body() as grid x threads CUDA threads with smem_bytes of dynamic
// shared memory. A rule broken in any thread (an exception) aborts the
// process with its message: the block's other threads would otherwise wait
// at the next barrier for ever.
template <typename Body>
void launch(dim3 grid, int threads, size_t smem_bytes, Body body) {
  if (threads % 32 != 0 || threads > 1024) fail("block size must be a multiple of 32, at most 1024");
  if (smem_bytes > kSmemCapacity) fail("more dynamic shared memory than an SM has");
  gridDim = grid;
  blockDim = dim3(unsigned(threads));
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      blockIdx = dim3(bx, by);
      std::memset(g_smem, 0xFF, kSmemCapacity);
      BlockState state(threads);
      g_block = &state;
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          threadIdx = make_uint3(unsigned(t), 0, 0);
          try {
            body();
          } catch (const std::exception& e) {
            std::fprintf(stderr, "%s (block %u,%u thread %d)\n", e.what(), blockIdx.x, blockIdx.y, t);
            std::abort();
          }
        });
      for (auto& th : pool) th.join();
      g_block = nullptr;
      for (size_t i = smem_bytes; i < kSmemCapacity; ++i)
        if (g_smem[i] != 0xFF) {
          char msg[128];
          std::snprintf(msg, sizeof msg, "shared memory written at byte %zu, past the launch's %zu", i, smem_bytes);
          fail(msg);
        }
    }
}

}  // namespace emulated_cuda

inline void __syncthreads() { emulated_cuda::g_block->block.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emulated_cuda::warp_barrier().arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  auto& slots = emulated_cuda::g_block->shfl;
  const unsigned me = threadIdx.x, warp0 = me / 32 * 32;
  slots[me] = v;
  emulated_cuda::warp_barrier().arrive_and_wait();
  const float other = slots[warp0 + ((me % 32) ^ unsigned(lane_mask))];
  emulated_cuda::warp_barrier().arrive_and_wait();  // nobody overwrites a slot before all have read
  return other;
}
inline unsigned char* dynamic_smem() { return emulated_cuda::g_smem; }
inline int min(int a, int b) { return a < b ? a : b; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
[[noreturn]] inline void __trap() { emulated_cuda::fail("__trap"); }

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "emulated WMMA models 16x16x16 only");
  float x[16][16];  // the logical tile (rows x columns of A, B or the accumulator)
};

namespace detail {
inline float widen(float v) { return v; }
inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
void check(const T* p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) emulated_cuda::fail("WMMA pointer not 32-byte aligned");
  if ((ldm * sizeof(T)) % 16 != 0) emulated_cuda::fail("WMMA ldm not a multiple of 16 bytes");
}
inline bool lane0() { return threadIdx.x % 32 == 0; }
}  // namespace detail

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  detail::check(p, ldm);
  constexpr bool col = std::is_same_v<Layout, col_major>;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r][c] = detail::widen(col ? p[r + c * ldm] : p[r * ldm + c]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  detail::check(p, ldm);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r][c] = l == mem_col_major ? p[r + c * ldm] : p[r * ldm + c];
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  detail::check(p, ldm);
  if (!detail::lane0()) return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) (l == mem_col_major ? p[r + c * ldm] : p[r * ldm + c]) = f.x[r][c];
}
template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float v) {
  for (auto& row : f.x)
    for (float& e : row) e = v;
}
template <typename TA, typename LA, typename TB, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  fragment<accumulator, 16, 16, 16, float> out;
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      float s = c.x[r][col];
      for (int k = 0; k < 16; ++k) s += a.x[r][k] * b.x[k][col];
      out.x[r][col] = s;
    }
  d = out;
}

}  // namespace nvcuda::wmma
