#include "model/cuda/check.hpp"
#include "model/cuda/dtype.cuh"
#include "model/cuda/gelu.hpp"

namespace gpt::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = f32(inp[i]);
  out[i] = store<T>(0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kCoeff * x * x * x))));
}

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

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t s) {
  gelu_forward_kernel<<<blocks_for(n, 256), 256, 0, s>>>(out, inp, n);
  GPT_CUDA_LAUNCHED();
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t s) {
  gelu_backward_kernel<<<blocks_for(n, 256), 256, 0, s>>>(dinp, inp, dout, n);
  GPT_CUDA_LAUNCHED();
}

template void gelu_forward<float>(float*, const float*, int64_t, cudaStream_t);
template void gelu_forward<bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, int64_t, cudaStream_t);

}  // namespace gpt::cuda
