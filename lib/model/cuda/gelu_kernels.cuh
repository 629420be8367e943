// Kernels of the unfused GELU (gelu.cu launches them; the fused path is a
// cuBLASLt epilogue). A header so the kernel code also runs on the CPU
// through tests/unit/emulated_cuda.hpp (test_cuda_simple_kernels_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::gelu_impl {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

// GPT-2's tanh approximation (model/cpu/gelu.hpp); one thread per element.
template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = f32(inp[i]);
  out[i] = store<T>(0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kCoeff * x * x * x))));
}

// dinp = dout * gelu'(inp); dinp may alias dout (each thread reads its
// element before writing it).
template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = f32(inp[i]);
  const float th = tanhf(kSqrt2OverPi * (x + kCoeff * x * x * x));
  const float sech2 = 1.f - th * th;
  const float grad = 0.5f * (1.f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.f + 3.f * kCoeff * x * x);
  dinp[i] = store<T>(grad * f32(dout[i]));
}

}  // namespace gpt::cuda::detail::gelu_impl
