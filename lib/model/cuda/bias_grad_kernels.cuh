// Kernels of the bias gradient of a linear layer (bias_grad.cu launches them):
// column sums of dout in a fixed order, so deterministic. A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_cuda_simple_kernels_emulated).
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::bias_grad_impl {

constexpr int kThreadsY = 8;            // a block is 32 columns x kThreadsY row lanes
constexpr int64_t kRowsPerPart = 256;   // rows per part (one block row), until
constexpr int64_t kMaxParts = 64;       // the parts are capped: partial sums in fp32

// Parts the N rows are split into; partial[] holds parts * OC floats.
inline int64_t parts_for(int64_t N) {
  return std::min(kMaxParts, std::max<int64_t>(1, (N + kRowsPerPart - 1) / kRowsPerPart));
}

// The two launches for dout[N, OC]: partial sums of `parts` parts of
// `chunk` rows each, then one thread per column adding them in order.
struct LaunchPlan {
  int64_t parts, chunk;
  dim3 partial_grid, partial_block;
  unsigned final_blocks;
  static constexpr int kFinalThreads = 256;
};
inline LaunchPlan launch_plan(int64_t N, int64_t OC) {
  const int64_t parts = parts_for(N);
  return {parts, (N + parts - 1) / parts, dim3(unsigned((OC + 31) / 32), unsigned(parts)), dim3(32, kThreadsY),
          blocks_for(OC, LaunchPlan::kFinalThreads)};
}

// Block (x: 32 columns, y: part p), threads (32, kThreadsY): partial column
// sums of rows [p * chunk, (p + 1) * chunk), thread row y taking every
// kThreadsY-th row, into partial[p, OC].
template <typename T>
__global__ void bias_grad_partial_kernel(float* partial, const T* dout, int64_t N, int64_t OC, int64_t chunk) {
  __shared__ float acc[kThreadsY][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = min(N, r0 + chunk);
  float s = 0.f;
  if (col < OC)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kThreadsY) s += f32(dout[r * OC + col]);
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < OC) {
    float t = 0.f;
    for (int y = 0; y < kThreadsY; ++y) t += acc[y][threadIdx.x];
    partial[int64_t(blockIdx.y) * OC + col] = t;
  }
}

// dbias[col] += the parts' partial sums, in part order; one thread per column.
template <typename T>
__global__ void bias_grad_final_kernel(T* dbias, const float* partial, int64_t parts, int64_t OC) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= OC) return;
  float s = 0.f;
  for (int64_t p = 0; p < parts; ++p) s += partial[p * OC + col];
  dbias[col] = store<T>(f32(dbias[col]) + s);
}

}  // namespace gpt::cuda::detail::bias_grad_impl
