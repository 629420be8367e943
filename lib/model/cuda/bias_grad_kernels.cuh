// Kernels of the bias gradient of a linear layer (bias_grad.cu launches them):
// column sums of dout in a fixed order, so deterministic. A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_cuda_simple_kernels_emulated).
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::bias_grad_impl {

constexpr int kThreadsY = 8;  // a block is 32 column lanes x kThreadsY row lanes

// Parts the N rows are split into (partial[] holds parts * OC floats): at
// most kMaxParts of at least kRowsPerPart rows. With 16-byte loads (W > 1)
// a block covers 32 * W columns, W times fewer blocks per part, so parts are
// smaller and more (64 rows, up to 256) to keep the GPU's SMs busy: 768
// blocks for GPT-2's narrowest bias (768 columns) at 16K rows.
template <int W>
constexpr int64_t kRowsPerPart = W == 1 ? 256 : 64;
template <int W>
constexpr int64_t kMaxParts = W == 1 ? 64 : 256;
template <int W>
inline int64_t parts_for(int64_t N) {
  return std::min(kMaxParts<W>, std::max<int64_t>(1, (N + kRowsPerPart<W> - 1) / kRowsPerPart<W>));
}

// The two launches for dout[N, OC] with W columns per lane: partial sums of
// `parts` parts of `chunk` rows each, then the parts added per column
// (blocks of 32 columns x kThreadsY lanes over the parts).
struct LaunchPlan {
  int64_t parts, chunk;
  dim3 partial_grid, partial_block;
  dim3 final_grid, final_block;
};
template <int W>
inline LaunchPlan launch_plan(int64_t N, int64_t OC) {
  const int64_t parts = parts_for<W>(N);
  return {parts, (N + parts - 1) / parts, dim3(unsigned((OC + 32 * W - 1) / (32 * W)), unsigned(parts)),
          dim3(32, kThreadsY), dim3(blocks_for(OC, 32)), dim3(32, kThreadsY)};
}

// Block (x: 32 lanes of W columns each, y: part p), threads (32, kThreadsY):
// partial column sums of rows [p * chunk, (p + 1) * chunk), thread row y
// taking every kThreadsY-th row, into partial[p, OC]. W = kVec<T> reads 16
// bytes per row (OC a multiple of W, dout 16-byte aligned), W = 1 one
// element. With the same parts and chunk, every W adds each column's values
// in the same order (the same sums, bit for bit).
template <int W, typename T>
__global__ void bias_grad_partial_kernel(float* partial, const T* dout, int64_t N, int64_t OC, int64_t chunk) {
  __shared__ float acc[kThreadsY][W][33];
  const int64_t col = (int64_t(blockIdx.x) * 32 + threadIdx.x) * W;
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = min(N, r0 + chunk);
  float s[W] = {};
  // Unrolled so that a thread's loads (8 rows of a 64-row part) are in
  // flight together; the adds stay in row order (the same bits).
  if (col < OC)
#pragma unroll 8
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kThreadsY) {
      float v[W];
      load_n<W>(v, dout + r * OC + col);
#pragma unroll
      for (int k = 0; k < W; ++k) s[k] += v[k];
    }
#pragma unroll
  for (int k = 0; k < W; ++k) acc[threadIdx.y][k][threadIdx.x] = s[k];
  __syncthreads();
  if (threadIdx.y == 0 && col < OC) {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      float t = 0.f;
      for (int y = 0; y < kThreadsY; ++y) t += acc[y][k][threadIdx.x];
      partial[int64_t(blockIdx.y) * OC + col + k] = t;
    }
  }
}

// dbias[col] += the parts' partial sums. Block (32 columns, kThreadsY
// lanes): lane y adds parts y, y + kThreadsY, ... in order, then lane 0 adds
// the lanes' sums in lane order. A fixed order (deterministic) with
// kThreadsY loads in flight per column: one thread per column adding 256
// parts in one chain took 32 us per call on an H200, longer than the partial
// sums over all of dout.
template <typename T>
__global__ void bias_grad_final_kernel(T* dbias, const float* partial, int64_t parts, int64_t OC) {
  __shared__ float acc[kThreadsY][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.f;
  if (col < OC)
    for (int64_t p = threadIdx.y; p < parts; p += kThreadsY) s += partial[p * OC + col];
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < OC) {
    float t = 0.f;
    for (int y = 0; y < kThreadsY; ++y) t += acc[y][threadIdx.x];
    dbias[col] = store<T>(f32(dbias[col]) + t);
  }
}

}  // namespace gpt::cuda::detail::bias_grad_impl
