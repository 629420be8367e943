// The launchers of the kernels Matmul calls (gelu.cu, bias_grad.cu), for
// tests without a GPU: the same kernels from their headers with the same
// grids, run by emulated_cuda.hpp. Streams are program order here, so a
// launch is complete when it returns.
#include "emulated_cuda.hpp"
// (must precede the kernel headers)
#include "model/cuda/bias_grad_kernels.cuh"
#include "model/cuda/gelu_kernels.cuh"

#include "model/cuda/bias_grad.hpp"
#include "model/cuda/gelu.hpp"

namespace gpt::cuda {

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t) {
  using namespace detail::gelu_impl;
  emulated_cuda::launch(dim3(blocks_for(n, kThreads)), kThreads, 0, [&] { gelu_forward_kernel<T>(out, inp, n); });
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t) {
  using namespace detail::gelu_impl;
  emulated_cuda::launch(dim3(blocks_for(n, kThreads)), kThreads, 0,
                        [&] { gelu_backward_kernel<T>(dinp, inp, dout, n); });
}

int64_t bias_grad_scratch(int64_t N, int64_t OC) { return detail::bias_grad_impl::parts_for(N) * OC; }

template <typename T>
void bias_grad(T* dbias, const T* dout, float* scratch, int64_t N, int64_t OC, cudaStream_t) {
  using namespace detail::bias_grad_impl;
  const LaunchPlan l = launch_plan(N, OC);
  emulated_cuda::launch(l.partial_grid, l.partial_block, 0,
                        [&] { bias_grad_partial_kernel<T>(scratch, dout, N, OC, l.chunk); });
  emulated_cuda::launch(dim3(l.final_blocks), LaunchPlan::kFinalThreads, 0,
                        [&] { bias_grad_final_kernel<T>(dbias, scratch, l.parts, OC); });
}

template void gelu_forward<float>(float*, const float*, int64_t, cudaStream_t);
template void gelu_forward<bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, int64_t, cudaStream_t);
template void bias_grad<float>(float*, const float*, float*, int64_t, int64_t, cudaStream_t);
template void bias_grad<bf16>(bf16*, const bf16*, float*, int64_t, int64_t, cudaStream_t);

}  // namespace gpt::cuda
