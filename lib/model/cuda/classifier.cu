#include <algorithm>

#include "model/cuda/launch.cuh"
#include "model/cuda/classifier.hpp"
#include "model/cuda/classifier_kernels.cuh"

namespace gpt::cuda {

using namespace detail::classifier_impl;

template <typename T>
void classifier_forward_backward(Matmul& mm, const ClassifierArgs<T>& a, const ClassifierShape& s,
                                 cudaStream_t stream) {
  const bool grad = a.dinp != nullptr;
  const int width = vector_width<T>(s.Vp, {a.logits});
  // Aligned rows that fit the registers are read once (softmax_xent_rows_kernel).
  const bool rows_in_registers = width == kVec<T> && s.Vp <= max_row_columns<T>();
  for (int64_t r0 = 0; r0 < s.N; r0 += a.chunk_rows) {
    const int64_t rows = std::min(a.chunk_rows, s.N - r0);
    const T* x = a.inp + r0 * s.C;
    mm.linear_forward<T>(a.logits, x, a.wte, nullptr, rows, s.C, s.Vp, stream);
    if (rows_in_registers)
      detail::launch_kernel(softmax_xent_rows_kernel<T>, unsigned(rows), kRowThreads, 0, stream, a.logits,
                            a.losses + r0, a.targets + r0, s.V, s.Vp, grad, a.loss_scale);
    else
      with_width<T>(width, [&](auto w) {
        detail::launch_kernel(softmax_xent_kernel<T, w()>, unsigned(rows), kThreads, 0, stream, a.logits,
                              a.losses + r0, a.targets + r0, s.V, s.Vp, grad, a.loss_scale);
      });
    if (grad) mm.linear_backward<T>(a.dinp + r0 * s.C, a.dwte, nullptr, a.logits, x, a.wte, rows, s.C, s.Vp, stream);
  }
}

template <typename T>
void classifier_logits_row(Matmul& mm, T* logits, const T* inp_row, const T* wte, const ClassifierShape& s,
                           cudaStream_t stream) {
  mm.linear_forward<T>(logits, inp_row, wte, nullptr, 1, s.C, s.Vp, stream);
  if (s.Vp > s.V) {
    detail::launch_kernel(mask_padded_kernel<T>, blocks_for(s.Vp - s.V, 256), 256, 0, stream, logits, s.V, s.Vp);
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
