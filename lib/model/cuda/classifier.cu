#include <algorithm>

#include "model/cuda/check.hpp"
#include "model/cuda/classifier.hpp"
#include "model/cuda/dtype.cuh"

namespace gpt::cuda {
namespace {

constexpr int kThreads = 512;

// One block per row of the chunk: loss, and with grad the logits replaced by
// d(objective)/d(logit) (padded columns get 0).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_xent_kernel(T* logits, float* losses, const int32_t* targets, int64_t V, int64_t Vp, bool grad,
                        float loss_scale) {
  const int64_t row = blockIdx.x;
  T* l = logits + row * Vp;
  // Per-thread online max / normaliser, then combined over the block.
  float m = -INFINITY, s = 0.f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const float x = f32(l[j]);
    if (x > m) {
      s = s * expf(m - x) + 1.f;
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  const float M = block_max(m);
  const float S = block_sum(m == -INFINITY ? 0.f : s * expf(m - M));
  const float lse = M + logf(S);
  const int32_t tgt = targets[row];
  if (threadIdx.x == 0) losses[row] = lse - f32(l[tgt]);
  if (!grad) return;
  __syncthreads();  // thread 0 has read l[tgt] before anyone overwrites it
  for (int64_t j = threadIdx.x; j < Vp; j += blockDim.x) {
    const float g = j < V ? (expf(f32(l[j]) - lse) - (j == tgt ? 1.f : 0.f)) * loss_scale : 0.f;
    l[j] = store<T>(g);
  }
}

template <typename T>
__global__ void mask_padded_kernel(T* logits, int64_t V, int64_t Vp) {
  const int64_t j = V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < Vp) logits[j] = store<T>(-INFINITY);
}

}  // namespace

template <typename T>
void classifier_forward_backward(Matmul& mm, const ClassifierArgs<T>& a, const ClassifierShape& s,
                                 cudaStream_t stream) {
  const bool grad = a.dinp != nullptr;
  for (int64_t r0 = 0; r0 < s.N; r0 += a.chunk_rows) {
    const int64_t rows = std::min(a.chunk_rows, s.N - r0);
    const T* x = a.inp + r0 * s.C;
    mm.linear_forward<T>(a.logits, x, a.wte, nullptr, rows, s.C, s.Vp, stream);
    softmax_xent_kernel<T><<<unsigned(rows), kThreads, 0, stream>>>(a.logits, a.losses + r0, a.targets + r0, s.V,
                                                                    s.Vp, grad, a.loss_scale);
    GPT_CUDA_LAUNCHED();
    if (grad) mm.linear_backward<T>(a.dinp + r0 * s.C, a.dwte, nullptr, a.logits, x, a.wte, rows, s.C, s.Vp, stream);
  }
}

template <typename T>
void classifier_logits_row(Matmul& mm, T* logits, const T* inp_row, const T* wte, const ClassifierShape& s,
                           cudaStream_t stream) {
  mm.linear_forward<T>(logits, inp_row, wte, nullptr, 1, s.C, s.Vp, stream);
  if (s.Vp > s.V) {
    mask_padded_kernel<T><<<blocks_for(s.Vp - s.V, 256), 256, 0, stream>>>(logits, s.V, s.Vp);
    GPT_CUDA_LAUNCHED();
  }
}

template void classifier_forward_backward<float>(Matmul&, const ClassifierArgs<float>&, const ClassifierShape&,
                                                 cudaStream_t);
template void classifier_forward_backward<bf16>(Matmul&, const ClassifierArgs<bf16>&, const ClassifierShape&,
                                                cudaStream_t);
template void classifier_logits_row<float>(Matmul&, float*, const float*, const float*, const ClassifierShape&,
                                           cudaStream_t);
template void classifier_logits_row<bf16>(Matmul&, bf16*, const bf16*, const bf16*, const ClassifierShape&,
                                          cudaStream_t);

}  // namespace gpt::cuda
