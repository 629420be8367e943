#include "model/cpu/classifier.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/cpu/eigen_maps.hpp"
#include "model/cpu/gemm.hpp"
#include "model/cpu/matmul.hpp"

namespace gpt::cpu {

template <typename T>
void classifier_forward_backward(const ClassifierArgs<T>& a, const ClassifierShape& s) {
  const bool grad = a.dinp != nullptr;
  CMapR<T> W(a.wte, s.Vp, s.C);
  const bool blas = fp32_openblas<T>();
  for (int64_t r0 = 0; r0 < s.N; r0 += a.chunk_rows) {
    const int64_t rows = std::min(a.chunk_rows, s.N - r0);
    CMapR<T> x(a.inp + r0 * s.C, rows, s.C);
    MapR<T> logits(a.logits, rows, s.Vp);
    if (blas)
      openblas_gemm(false, true, rows, s.Vp, s.C, a.inp + r0 * s.C, s.C, a.wte, s.C, 0.f, a.logits, s.Vp);
    else
      logits.noalias() = x * W.transpose();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      T* l = logits.row(i).data();
      const int32_t tgt = a.targets[r0 + i];
      ArrMap<T> row(l, s.V);  // the real vocabulary's columns
      const T mx = row.maxCoeff();
      const T lse = mx + std::log((row - mx).exp().sum());
      a.losses[r0 + i] = lse - l[tgt];
      if (grad) {
        row = (row - lse).exp() * a.loss_scale;
        l[tgt] -= a.loss_scale;
        for (int64_t j = s.V; j < s.Vp; ++j) l[j] = 0;
      }
    }
    if (grad && blas) {
      openblas_gemm(false, false, rows, s.C, s.Vp, a.logits, s.Vp, a.wte, s.C, 0.f, a.dinp + r0 * s.C, s.C);
      openblas_gemm(true, false, s.Vp, s.C, rows, a.logits, s.Vp, a.inp + r0 * s.C, s.C, 1.f, a.dwte, s.C);
    } else if (grad) {
      MapR<T> dx(a.dinp + r0 * s.C, rows, s.C);
      MapR<T> dW(a.dwte, s.Vp, s.C);
      dx.noalias() = logits * W;
      dW.noalias() += logits.transpose() * x;
    }
  }
}

template <typename T>
void classifier_logits_row(T* logits, const T* inp_row, const T* wte, const ClassifierShape& s) {
  matvec_rows(logits, wte, inp_row, s.Vp, s.C);
  for (int64_t j = s.V; j < s.Vp; ++j) logits[j] = -std::numeric_limits<T>::infinity();
}

template void classifier_forward_backward<float>(const ClassifierArgs<float>&, const ClassifierShape&);
template void classifier_forward_backward<double>(const ClassifierArgs<double>&, const ClassifierShape&);
template void classifier_logits_row<float>(float*, const float*, const float*, const ClassifierShape&);
template void classifier_logits_row<double>(double*, const double*, const double*, const ClassifierShape&);

}  // namespace gpt::cpu
