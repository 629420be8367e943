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

// Groups of 32 * W columns (a block's lanes) covering OC; each has an
// arrival counter (bias_grad_kernel).
template <int W>
inline int64_t column_groups(int64_t OC) {
  return (OC + 32 * W - 1) / (32 * W);
}

// The launch for dout[N, OC] with W columns per lane: a block per part of
// `chunk` rows and group of 32 * W columns, threads (32, kThreadsY).
struct LaunchPlan {
  int64_t parts, chunk;
  dim3 grid, block;
};
template <int W>
inline LaunchPlan launch_plan(int64_t N, int64_t OC) {
  const int64_t parts = parts_for<W>(N);
  return {parts, (N + parts - 1) / parts, dim3(unsigned(column_groups<W>(OC)), unsigned(parts)),
          dim3(32, kThreadsY)};
}

// W floats at p (16-byte aligned when W is a multiple of 4), read from L2:
// they were written by other blocks of the same launch (after their
// __threadfence), so this SM's L1 may hold none or stale lines of them.
template <int W>
__device__ __forceinline__ void load_l2(float (&v)[W], const float* p) {
  if constexpr (W % 4 == 0) {
#pragma unroll
    for (int k = 0; k < W; k += 4) {
      const float4 q = __ldcg(reinterpret_cast<const float4*>(p + k));
      v[k] = q.x, v[k + 1] = q.y, v[k + 2] = q.z, v[k + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = __ldcg(p + k);
  }
}

// Block (x: 32 lanes of W columns each, y: part p), threads (32, kThreadsY):
// partial column sums of rows [p * chunk, (p + 1) * chunk), thread row y
// taking every kThreadsY-th row, into partial[p, OC]. Then the last block
// of column group x to arrive (arrivals[x] counts them: zero before the
// launch, and that block sets it back to zero) adds the parts' partial sums
// into dbias: lane y adds parts y, y + kThreadsY, ... in order, then lane 0
// adds the lanes' sums in lane order. Fixed orders, so deterministic; W =
// kVec<T> reads 16 bytes per row (OC a multiple of W, dout 16-byte aligned),
// W = 1 one element, and with the same parts and chunk every W adds each
// column's values in the same order (the same sums, bit for bit). (The
// final sum was a second launch: 48 a step for gpt2-124m, 0.23 ms on the
// H200, about 4.8 us each.)
template <int W, typename T>
__global__ void bias_grad_kernel(T* dbias, float* partial, unsigned* arrivals, const T* dout, int64_t N, int64_t OC,
                                 int64_t chunk) {
  __shared__ float acc[kThreadsY][W][33];
  __shared__ bool last;
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
  // t = the block's kThreadsY row lanes' s added in lane order, in lane 0.
  const auto lane_sums = [&](float(&t)[W]) {
#pragma unroll
    for (int k = 0; k < W; ++k) acc[threadIdx.y][k][threadIdx.x] = s[k];
    __syncthreads();
    if (threadIdx.y != 0) return;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      t[k] = 0.f;
      for (int y = 0; y < kThreadsY; ++y) t[k] += acc[y][k][threadIdx.x];
    }
  };
  float t[W];
  lane_sums(t);
  if (threadIdx.y == 0 && col < OC) {
#pragma unroll
    for (int k = 0; k < W; ++k) partial[int64_t(blockIdx.y) * OC + col + k] = t[k];
    __threadfence();  // the partial is visible to every block before this block's arrival counts
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(arrivals + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
#pragma unroll
  for (int k = 0; k < W; ++k) s[k] = 0.f;
  if (col < OC)
#pragma unroll 4
    for (int64_t p = threadIdx.y; p < gridDim.y; p += kThreadsY) {
      float v[W];
      load_l2<W>(v, partial + p * OC + col);
#pragma unroll
      for (int k = 0; k < W; ++k) s[k] += v[k];
    }
  lane_sums(t);
  if (threadIdx.y == 0 && col < OC)
#pragma unroll
    for (int k = 0; k < W; ++k) dbias[col + k] = store<T>(f32(dbias[col + k]) + t[k]);
  if (threadIdx.x == 0 && threadIdx.y == 0) arrivals[blockIdx.x] = 0;  // ready for the next launch
}

}  // namespace gpt::cuda::detail::bias_grad_impl
