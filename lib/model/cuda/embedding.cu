#include <algorithm>
#include <numeric>

#include "model/cuda/check.hpp"
#include "model/cuda/dtype.cuh"
#include "model/cuda/embedding.hpp"

namespace gpt::cuda {
namespace {

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t Tn,
                                         int64_t C, int64_t total) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t row = i / C, c = i % C;
  const int64_t t = row % Tn;
  out[i] = store<T>(f32(wte[int64_t(tokens[row]) * C + c]) + f32(wpe[t * C + c]));
}

// Block (g, y): group g, channels [y*blockDim.x, ...). Rows of the group are
// added in `order`'s (ascending row) order.
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

template <typename T>
__global__ void wpe_backward_kernel(T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // t * C + c
  if (i >= Tn * C) return;
  float acc = 0.f;
  for (int64_t b = 0; b < B; ++b) acc += f32(dout[b * Tn * C + i]);
  dwpe[i] = store<T>(f32(dwpe[i]) + acc);
}

}  // namespace

void TokenGroups::build(const int32_t* tokens, int64_t n) {
  rows = n;
  packed.resize(size_t(3 * n + 1));
  int32_t* order = packed.data();
  std::iota(order, order + n, 0);
  std::stable_sort(order, order + n, [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
  // Group boundaries into a temporary tail, then compact starts | token.
  std::vector<int32_t> starts, ids;
  starts.reserve(size_t(n) + 1);
  ids.reserve(size_t(n));
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || tokens[order[k]] != tokens[order[k - 1]]) {
      starts.push_back(int32_t(k));
      ids.push_back(tokens[order[k]]);
    }
  }
  starts.push_back(int32_t(n));
  num_groups = int32_t(ids.size());
  std::copy(starts.begin(), starts.end(), packed.begin() + n);
  std::copy(ids.begin(), ids.end(), packed.begin() + n + int64_t(starts.size()));
  packed.resize(size_t(n + int64_t(starts.size()) + int64_t(ids.size())));
}

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn, int64_t C,
                       cudaStream_t s) {
  const int64_t total = B * Tn * C;
  embedding_forward_kernel<<<blocks_for(total, 256), 256, 0, s>>>(out, tokens, wte, wpe, Tn, C, total);
  GPT_CUDA_LAUNCHED();
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* groups, int32_t num_groups, int64_t B,
                        int64_t Tn, int64_t C, cudaStream_t s) {
  const int64_t N = B * Tn;
  const int32_t* order = groups;
  const int32_t* starts = groups + N;
  const int32_t* token = starts + num_groups + 1;
  if (num_groups > 0) {
    dim3 grid(unsigned(num_groups), blocks_for(C, 128));
    wte_backward_kernel<<<grid, 128, 0, s>>>(dwte, dout, order, starts, token, C);
    GPT_CUDA_LAUNCHED();
  }
  wpe_backward_kernel<<<blocks_for(Tn * C, 256), 256, 0, s>>>(dwpe, dout, B, Tn, C);
  GPT_CUDA_LAUNCHED();
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
