// Launchers of the unfused GELU kernels (gelu_kernels.cuh).
#include "model/cuda/launch.cuh"
#include "model/cuda/gelu.hpp"
#include "model/cuda/gelu_kernels.cuh"

namespace gpt::cuda {

using namespace detail::gelu_impl;

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t s) {
  detail::launch_kernel(gelu_forward_kernel<T>, blocks_for(n, kThreads), kThreads, 0, s, out, inp, n);
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t s) {
  detail::launch_kernel(gelu_backward_kernel<T>, blocks_for(n, kThreads), kThreads, 0, s, dinp, inp, dout, n);
}

template void gelu_forward<float>(float*, const float*, int64_t, cudaStream_t);
template void gelu_forward<bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, int64_t, cudaStream_t);

}  // namespace gpt::cuda
