// Kernels of the embedding op (embedding.cu launches them). A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_cuda_simple_kernels_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::embedding_impl {

constexpr int kThreads = 256;     // forward and dwpe: one element per thread
constexpr int kWteThreads = 128;  // dwte: channels per block of a token group

// out[row, c] = wte[tokens[row], c] + wpe[row % Tn, c]; one thread per element.
template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t Tn,
                                         int64_t C, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t row = i / C, c = i % C;
  const int64_t t = row % Tn;
  out[i] = store<T>(f32(wte[int64_t(tokens[row]) * C + c]) + f32(wpe[t * C + c]));
}

// Block (g, y): token group g (TokenGroups' packed layout), channels
// [y * blockDim.x, ...). The group's rows are summed in `order`'s (ascending
// row) order in fp32 and added to dwte once: deterministic, no atomics.
template <typename T>
__global__ void wte_backward_kernel(T* dwte, const T* dout, const int32_t* order, const int32_t* starts,
                                    const int32_t* token, int64_t C) {
  const int g = blockIdx.x;
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.f;
  for (int k = starts[g]; k < starts[g + 1]; ++k) acc += f32(dout[int64_t(order[k]) * C + c]);
  T* dst = dwte + int64_t(token[g]) * C + c;
  *dst = store<T>(f32(*dst) + acc);
}

// dwpe[t, c] += sum over b of dout[b, t, c], b ascending; one thread per (t, c).
template <typename T>
__global__ void wpe_backward_kernel(T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // t * C + c
  if (i >= Tn * C) return;
  float acc = 0.f;
  for (int64_t b = 0; b < B; ++b) acc += f32(dout[b * Tn * C + i]);
  dwpe[i] = store<T>(f32(dwpe[i]) + acc);
}

}  // namespace gpt::cuda::detail::embedding_impl
