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
// the result does not depend on anything but the data. 512 blocks of 256
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

// partial[blockIdx.x] = this block's sum of x[i] (squared with kSquare) in
// double, over the elements of its grid-stride loop, reduced as a tree.
// vec (x 16-byte aligned): each thread reads kVec<T> elements per access
// (16 bytes) and the last n % kVec<T> elements one at a time; else one
// element per access. Either way the set each thread adds, and its order,
// depend on n and vec only. Launch: kSumBlocks x kSumThreads. (One 2-byte
// load per thread and iteration read gpt2-124m's bf16 gradients at 0.6 TB/s
// on an H200.)
template <typename T, bool kSquare>
__global__ void sum_kernel(const T* x, int64_t n, double* partial, bool vec) {
  constexpr int W = kVec<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  double s = 0;
  int64_t tail = 0;
  if (vec) {
    const int64_t nv = n / W;
    for (int64_t i = first; i < nv; i += stride) {
      float v[W];
      load_n<W>(v, x + i * W);
#pragma unroll
      for (int k = 0; k < W; ++k) s += kSquare ? double(v[k]) * v[k] : double(v[k]);
    }
    tail = nv * W;
  }
  for (int64_t i = tail + first; i < n; i += stride) {
    const double v = f64(x[i]);
    s += kSquare ? v * v : v;
  }
  s = block_tree_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// *out += the n partials: thread t adds partials t, t + kSumThreads, ... in
// order, then a tree over the threads (a fixed order). Launch: one block of
// kSumThreads. (One thread adding 512 in a chain took 20 us.)
__global__ void sum_partials_kernel(const double* partial, int n, double* out) {
  double s = 0;
  for (int i = threadIdx.x; i < n; i += kSumThreads) s += partial[i];
  s = block_tree_sum(s);
  if (threadIdx.x == 0) *out += s;
}

}  // namespace gpt::cuda::detail::elementwise_impl
