// Kernels of the small device ops (elementwise.cu launches them): casts,
// accumulation, and the deterministic sums behind the global gradient norm
// and the logged loss. A header so the kernel code also runs on the CPU
// through tests/unit/emulated_cuda.hpp (test_cuda_simple_kernels_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::elementwise_impl {

constexpr int kThreads = 256;
// The sums' grid is fixed, not sized by n: every block then sums the same
// set of elements for any n, and the partials are added in block order, so
// the result does not depend on anything but the data (and the list's
// shape). 512 blocks of 256
// fill an H100 (132 SMs) several times over.
constexpr int kSumBlocks = 512;
constexpr int kSumThreads = 256;

__device__ __forceinline__ double f64(float x) { return x; }
__device__ __forceinline__ double f64(bf16 x) { return __bfloat162float(x); }

// Grid of the grid-stride casts: one thread per element up to 65535 * 8
// blocks (a grid-stride loop covers the rest), at least one block.
inline unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

template <typename To, typename From>
__global__ void convert_kernel(To* dst, const From* src, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = store<To>(f32(src[i]));
}

template <typename Acc, typename Src>
__global__ void accumulate_kernel(Acc* acc, const Src* src, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] = store<Acc>(f32(acc[i]) + f32(src[i]));
}

// The sum of the kSumThreads threads' s, as a tree in a fixed order (so
// deterministic), valid in thread 0. Every thread of the block calls it.
__device__ __forceinline__ double block_tree_sum(double s) {
  __shared__ double part[kSumThreads];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kSumThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[0];
}

// The arrays one sum launch covers: the global gradient norm takes every
// unit's gradient in one launch (a rank's 14 units of gpt2-124m, or a
// 48-layer model's 50), where one launch per unit (and a second to add its
// partials) cost 28 launches per step, mostly too short to fill the GPU. A
// kernel parameter (__grid_constant__: read in place, not copied per
// thread), 1 KiB, well inside the 4 KiB every architecture accepts.
constexpr int kMaxSegments = 64;
template <typename T>
struct Segments {
  const T* x[kMaxSegments];
  int64_t n[kMaxSegments];
  int count;
};

// Loads each thread has in flight per iteration of the vector loop: one
// 16-byte load per thread and iteration kept too few bytes in flight
// (gpt2-124m's bf16 gradients were read at 0.6 TB/s on an H200).
constexpr int kSumLoads = 4;

// *out += the sum of x[i] (squared with kSquare) over every segment, in
// double. Launch: kSumBlocks x kSumThreads; scratch = partial[kSumBlocks]
// and the arrival counter, zero before the launch and left zero after it.
// Thread t of block b adds, segment by segment in list order, the elements
// of its grid-stride loop (16-byte vectors where the segment's start is
// 16-byte aligned, then the n % kVec<T> left one by one, else one element
// per access); the block adds its threads as a tree, and the last block to
// arrive adds the blocks' partials in block order. Every order depends on
// the list's sizes and alignments only, not on timing: deterministic.
// (The vectors are loaded kSumLoads at a time while that many are left,
// then one at a time, and added in grid-stride order either way.)
template <typename T, bool kSquare>
__global__ void __launch_bounds__(kSumThreads)
    sum_kernel(const __grid_constant__ Segments<T> segs, double* partial, unsigned* arrivals, double* out) {
  constexpr int W = kVec<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  double s = 0;
  for (int k = 0; k < segs.count; ++k) {
    const T* x = segs.x[k];
    const int64_t n = segs.n[k];
    int64_t tail = 0;
    if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
      const int64_t nv = n / W;
      const auto add = [&](const float(&v)[W]) {
#pragma unroll
        for (int e = 0; e < W; ++e) s += kSquare ? double(v[e]) * v[e] : double(v[e]);
      };
      int64_t i = first;
      for (; i + (kSumLoads - 1) * stride < nv; i += kSumLoads * stride) {
        float v[kSumLoads][W];
#pragma unroll
        for (int u = 0; u < kSumLoads; ++u) load_n<W>(v[u], x + (i + u * stride) * W);
#pragma unroll
        for (int u = 0; u < kSumLoads; ++u) add(v[u]);
      }
      for (; i < nv; i += stride) {
        float v[W];
        load_n<W>(v, x + i * W);
        add(v);
      }
      tail = nv * W;
    }
    for (int64_t i = tail + first; i < n; i += stride) {
      const double v = f64(x[i]);
      s += kSquare ? v * v : v;
    }
  }
  s = block_tree_sum(s);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = s;
    __threadfence();  // the partial is visible to every block before the arrival counts
    last = atomicAdd(arrivals, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // Written by other blocks during this launch: read past this SM's L1.
  const volatile double* parts = partial;
  double t = 0;
  for (int i = threadIdx.x; i < int(gridDim.x); i += kSumThreads) t += parts[i];
  t = block_tree_sum(t);
  if (threadIdx.x == 0) {
    *out += t;
    *arrivals = 0;  // ready for the next launch
  }
}

}  // namespace gpt::cuda::detail::elementwise_impl
