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

// partial[blockIdx.x] = this block's sum of x[i] (squared with kSquare) in
// double, over the elements of its grid-stride loop, reduced as a tree.
// Launch: kSumBlocks x kSumThreads.
template <typename T, bool kSquare>
__global__ void sum_kernel(const T* x, int64_t n, double* partial) {
  __shared__ double part[kSumThreads];
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double v = f64(x[i]);
    s += kSquare ? v * v : v;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kSumThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

// *out += the n partials, in order. Launch: one thread.
__global__ void sum_partials_kernel(const double* partial, int n, double* out) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += partial[i];
  *out += s;
}

}  // namespace gpt::cuda::detail::elementwise_impl
