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

// The same result with the row read from memory once: each thread keeps
// its vectors of the row in registers (up to kRowVectors 16-byte vectors,
// so rows of up to kRowThreads * kRowVectors * kVec<T> columns: 65536 in
// bf16, 32768 in fp32; GPT-2's 50304 bf16 columns take 7 vectors per
// thread), so the logits cross HBM twice (read, then the gradient
// written) rather than three times. At most 64 registers a thread (1024
// threads): sm_80, sm_90 and sm_100 take 53-57 without spilling. The
// exponentials are base 2 with log2(e) folded into one FFMA. Rows must be
// 16-byte aligned with Vp a multiple of kVec<T> (the launcher's
// vector_width); others take softmax_xent_kernel. The loss is lse minus the
// target's logit, read by thread 0 before the first barrier, so before any
// thread overwrites it.
constexpr int kRowThreads = 1024;
constexpr int kRowVectors = 8;
template <typename T>
constexpr int64_t max_row_columns() { return int64_t(kRowThreads) * kRowVectors * kVec<T>; }

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    softmax_xent_rows_kernel(T* logits, float* losses, const int32_t* targets, int64_t V, int64_t Vp, bool grad,
                             float loss_scale) {
  constexpr int W = kVec<T>;
  T* l = logits + int64_t(blockIdx.x) * Vp;
  // Column indices in 32 bits (a row has at most max_row_columns() < 2^31):
  // 10 registers fewer than 64-bit ones at sm_80 and sm_90.
  const int vectors = int(Vp / W), Vi = int(V);
  const int32_t tgt = targets[blockIdx.x];
  const float target_logit = threadIdx.x == 0 ? f32(l[tgt]) : 0.f;
  uint4 raw[kRowVectors];
#pragma unroll
  for (int k = 0; k < kRowVectors; ++k) {
    const int c = int(threadIdx.x) + k * kRowThreads;
    if (c < vectors) raw[k] = *reinterpret_cast<const uint4*>(l + int64_t(c) * W);
  }
  // body(c, e) for each of this thread's vectors: c its index in the row, e its W elements.
  auto each_vector = [&](auto body) {
#pragma unroll
    for (int k = 0; k < kRowVectors; ++k) {
      const int c = int(threadIdx.x) + k * kRowThreads;
      if (c >= vectors) break;
      body(c, reinterpret_cast<const T*>(&raw[k]));
    }
  };
  // body(logit) for each of this thread's logits of columns below V.
  auto each_logit = [&](auto body) {
    each_vector([&](int c, const T* e) {
#pragma unroll
      for (int i = 0; i < W; ++i)
        if (c * W + i < Vi) body(f32(e[i]));
    });
  };
  float m = -INFINITY;
  each_logit([&](float v) { m = fmaxf(m, v); });
  const float M = block_max(m), neg_m2 = -M * kLog2e;
  // Each pass widens the row again: kept from the first, its floats take twice the registers of the row.
#pragma unroll
  for (uint4& r : raw) opaque(r);
  float s = 0.f;
  each_logit([&](float v) { s += exp2f(fmaf(v, kLog2e, neg_m2)); });
  const float lse = M + logf(block_sum(s));
  if (threadIdx.x == 0) losses[blockIdx.x] = lse - target_logit;
  if (!grad) return;
  const float neg_lse2 = -lse * kLog2e;
  each_vector([&](int c, const T* e) {
    float g[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const int j = c * W + i;
      g[i] = j < Vi ? (exp2f(fmaf(f32(e[i]), kLog2e, neg_lse2)) - (j == tgt ? 1.f : 0.f)) * loss_scale : 0.f;
    }
    store_n<W>(l + c * W, g);
  });
}

template <typename T>
__global__ void mask_padded_kernel(T* logits, int64_t V, int64_t Vp) {
  const int64_t j = V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < Vp) logits[j] = store<T>(-INFINITY);
}

}  // namespace gpt::cuda::detail::classifier_impl
