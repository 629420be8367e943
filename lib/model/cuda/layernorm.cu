#include "model/cuda/launch.cuh"
#include "model/cuda/layernorm.hpp"
#include "model/cuda/layernorm_kernels.cuh"

namespace gpt::cuda {

using namespace detail::layernorm_impl;

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b, int64_t N, int64_t C,
                       cudaStream_t s) {
  with_width<T>(vector_width<T>(C, {out, inp, w, b}), [&](auto width) {
    const auto kernel = C / width() <= 32 * kRowChunks ? layernorm_forward_rows_kernel<T, width()>
                                                       : layernorm_forward_kernel<T, width()>;
    detail::launch_kernel(kernel, blocks_for(N, kRowsPerBlock), 32 * kRowsPerBlock, 0, s, out, mean, rstd, inp, w, b,
                          N, C);
  });
}

int64_t layernorm_backward_scratch(int64_t C) { return int64_t(kBackwardWarps) * 2 * C; }

template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, float* scratch, const T* dout, const T* inp, const T* w,
                        const float* mean, const float* rstd, int64_t N, int64_t C, cudaStream_t s) {
  with_width<T>(vector_width<T>(C, {dinp, dout, inp, w}), [&](auto width) {
    const LayerNormBackwardPlan<T> plan = layernorm_backward_plan<T, width()>(C);
    detail::launch_kernel(plan.kernel, kBackwardBlocks, 32 * kBackwardWarpsPerBlock, 0, s, dinp, scratch, dout, inp,
                          w, mean, rstd, N, C);
    detail::launch_kernel(layernorm_param_grad_kernel<T>, param_grad_grid(C), param_grad_block(), 0, s, dw, db,
                          scratch, plan.parts, C);
  });
}

#define GPT_INSTANTIATE(T)                                                                                        \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int64_t, int64_t,          \
                                     cudaStream_t);                                                               \
  template void layernorm_backward<T>(T*, T*, T*, float*, const T*, const T*, const T*, const float*,           \
                                      const float*, int64_t, int64_t, cudaStream_t);
GPT_INSTANTIATE(float)
GPT_INSTANTIATE(bf16)
#undef GPT_INSTANTIATE

}  // namespace gpt::cuda
