// Launchers of the bias-gradient kernels (bias_grad_kernels.cuh).
#include <algorithm>

#include "model/cuda/bias_grad.hpp"
#include "model/cuda/bias_grad_kernels.cuh"
#include "model/cuda/launch.cuh"

namespace gpt::cuda {

using namespace detail::bias_grad_impl;

// Enough for either width (the vectorised one has at least as many parts).
int64_t bias_grad_scratch(int64_t N, int64_t OC) { return std::max(parts_for<1>(N), parts_for<8>(N)) * OC; }

// One per column group; one column per lane makes the most groups.
int64_t bias_grad_arrivals(int64_t OC) { return column_groups<1>(OC); }

template <typename T>
int bias_grad(T* dbias, const T* dout, float* scratch, unsigned* arrivals, int64_t N, int64_t OC, cudaStream_t s,
              int width) {
  const int used = width == 1 ? 1 : vector_width<T>(OC, {dout});
  with_width<T>(used, [&](auto w) {
    constexpr int W = decltype(w)::value;
    const LaunchPlan l = launch_plan<W>(N, OC);
    detail::launch_kernel(bias_grad_kernel<W, T>, l.grid, l.block, 0, s, dbias, scratch, arrivals, dout, N, OC,
                          l.chunk);
  });
  return used;
}

template int bias_grad<float>(float*, const float*, float*, unsigned*, int64_t, int64_t, cudaStream_t, int);
template int bias_grad<bf16>(bf16*, const bf16*, float*, unsigned*, int64_t, int64_t, cudaStream_t, int);

}  // namespace gpt::cuda
