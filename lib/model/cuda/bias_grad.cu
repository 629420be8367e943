// Launchers of the bias-gradient kernels (bias_grad_kernels.cuh).
#include <algorithm>

#include "model/cuda/bias_grad.hpp"
#include "model/cuda/bias_grad_kernels.cuh"
#include "model/cuda/launch.cuh"

namespace gpt::cuda {

using namespace detail::bias_grad_impl;

// Enough for either width (the vectorised one has at least as many parts).
int64_t bias_grad_scratch(int64_t N, int64_t OC) { return std::max(parts_for<1>(N), parts_for<8>(N)) * OC; }

template <typename T>
int bias_grad(T* dbias, const T* dout, float* scratch, int64_t N, int64_t OC, cudaStream_t s, int width) {
  const int used = width == 1 ? 1 : vector_width<T>(OC, {dout});
  with_width<T>(used, [&](auto w) {
    constexpr int W = decltype(w)::value;
    const LaunchPlan l = launch_plan<W>(N, OC);
    detail::launch_kernel(bias_grad_partial_kernel<W, T>, l.partial_grid, l.partial_block, 0, s, scratch, dout, N,
                          OC, l.chunk);
    detail::launch_kernel(bias_grad_final_kernel<T>, l.final_grid, l.final_block, 0, s, dbias, scratch, l.parts, OC);
  });
  return used;
}

template int bias_grad<float>(float*, const float*, float*, int64_t, int64_t, cudaStream_t, int);
template int bias_grad<bf16>(bf16*, const bf16*, float*, int64_t, int64_t, cudaStream_t, int);

}  // namespace gpt::cuda
