// Launchers of the embedding kernels (embedding_kernels.cuh).
#include "model/cuda/launch.cuh"
#include "model/cuda/embedding.hpp"
#include "model/cuda/embedding_kernels.cuh"

namespace gpt::cuda {

using namespace detail::embedding_impl;

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn, int64_t C,
                       cudaStream_t s) {
  const int64_t total = B * Tn * C;
  detail::launch_kernel(embedding_forward_kernel<T>, blocks_for(total, kThreads), kThreads, 0, s, out, tokens, wte,
                        wpe, Tn, C, total);
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* groups, int32_t num_groups, int64_t B,
                        int64_t Tn, int64_t C, cudaStream_t s) {
  const int64_t N = B * Tn;
  const int32_t* order = groups;
  const int32_t* starts = groups + N;
  const int32_t* token = starts + num_groups + 1;
  if (num_groups > 0) {
    dim3 grid(unsigned(num_groups), blocks_for(C, kWteThreads));
    detail::launch_kernel(wte_backward_kernel<T>, grid, kWteThreads, 0, s, dwte, dout, order, starts, token, C);
  }
  detail::launch_kernel(wpe_backward_kernel<T>, blocks_for(Tn * C, kThreads), kThreads, 0, s, dwpe, dout, B, Tn, C);
}

#define GPT_INSTANTIATE(T)                                                                                    \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int64_t, int64_t, int64_t,       \
                                     cudaStream_t);                                                           \
  template void embedding_backward<T>(T*, T*, const T*, const int32_t*, int32_t, int64_t, int64_t, int64_t, \
                                      cudaStream_t);
GPT_INSTANTIATE(float)
GPT_INSTANTIATE(bf16)
#undef GPT_INSTANTIATE

}  // namespace gpt::cuda
