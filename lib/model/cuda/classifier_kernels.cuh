// Kernels of the fused classifier (classifier.cu launches them between its
// cuBLASLt products). A header so the kernel code also runs on the CPU
// through tests/unit/emulated_cuda.hpp (test_cuda_kernels_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::classifier_impl {

constexpr int kThreads = 512;

// One block per row of the chunk: loss, and with grad the logits replaced by
// d(objective)/d(logit) (padded columns get 0). W elements per access
// (dtype.cuh's vector_width: W divides Vp and rows are 16-byte aligned when
// W > 1); columns past V in the last chunk are skipped.
template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    softmax_xent_kernel(T* logits, float* losses, const int32_t* targets, int64_t V, int64_t Vp, bool grad,
                        float loss_scale) {
  const int64_t row = blockIdx.x;
  T* l = logits + row * Vp;
  // Per-thread online max / normaliser, then combined over the block.
  float m = -INFINITY, s = 0.f;
  for (int64_t c = threadIdx.x; c * W < V; c += blockDim.x) {
    float v[W];
    load_n<W>(v, l + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if (c * W + k >= V) break;
      if (v[k] > m) {
        s = s * expf(m - v[k]) + 1.f;
        m = v[k];
      } else {
        s += expf(v[k] - m);
      }
    }
  }
  const float M = block_max(m);
  const float S = block_sum(m == -INFINITY ? 0.f : s * expf(m - M));
  const float lse = M + logf(S);
  const int32_t tgt = targets[row];
  if (threadIdx.x == 0) losses[row] = lse - f32(l[tgt]);
  if (!grad) return;
  __syncthreads();  // thread 0 has read l[tgt] before anyone overwrites it
  for (int64_t c = threadIdx.x; c < Vp / W; c += blockDim.x) {
    float v[W];
    load_n<W>(v, l + c * W);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const int64_t j = c * W + k;
      v[k] = j < V ? (expf(v[k] - lse) - (j == tgt ? 1.f : 0.f)) * loss_scale : 0.f;
    }
    store_n<W>(l + c * W, v);
  }
}

template <typename T>
__global__ void mask_padded_kernel(T* logits, int64_t V, int64_t Vp) {
  const int64_t j = V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < Vp) logits[j] = store<T>(-INFINITY);
}

}  // namespace gpt::cuda::detail::classifier_impl
