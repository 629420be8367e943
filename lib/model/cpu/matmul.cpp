#include "model/cpu/matmul.hpp"

#include <algorithm>
#include <type_traits>

#include "model/cpu/eigen_maps.hpp"
#include "model/cpu/gemm.hpp"

namespace gpt::cpu {

template <typename T>
void matvec_rows(T* y, const T* W, const T* x, int64_t rows, int64_t cols) {
  CVec<T> xv(x, cols);
  // A remainder under 8 rows joins the last slice: a slice of one row would
  // be a dot product, summed in another order than the whole product's row.
  const int64_t slices = std::max<int64_t>(1, rows / kMatvecSlice + (rows % kMatvecSlice >= 8 ? 1 : 0));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t r0 = i * kMatvecSlice, n = i + 1 < slices ? kMatvecSlice : rows - r0;
    Vec<T>(y + r0, n).noalias() = xv * CMapR<T>(W + r0 * cols, n, cols).transpose();
  }
}

template <typename T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int64_t N, int64_t C, int64_t OC) {
  MapR<T> y(out, N, OC);
  CMapR<T> x(inp, N, C), W(w, OC, C);
  if (N == 1) {
    matvec_rows(out, w, inp, OC, C);
  } else if (fp32_openblas<T>()) {
    openblas_gemm(false, true, N, OC, C, inp, C, w, C, 0.f, out, OC);
  } else {
    y.noalias() = x * W.transpose();  // Eigen's GEMM, threaded by OpenMP
  }
  if (bias) {
    CVec<T> b(bias, OC);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) y.row(i) += b;
  }
}

template <typename T>
void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int64_t N,
                     int64_t C, int64_t OC) {
  CMapR<T> dy(dout, N, OC), x(inp, N, C), W(w, OC, C);
  if (fp32_openblas<T>()) {
    if (dinp) openblas_gemm(false, false, N, C, OC, dout, OC, w, C, 0.f, dinp, C);
    openblas_gemm(true, false, OC, C, N, dout, OC, inp, C, 1.f, dw, C);
  } else {
    if (dinp) {
      MapR<T> dx(dinp, N, C);
      dx.noalias() = dy * W;
    }
    MapR<T> dW(dw, OC, C);
    dW.noalias() += dy.transpose() * x;
  }
  if (dbias) {
    // Column sums split by column blocks: deterministic for any thread count.
    constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < OC; j0 += kBlock) {
      const int64_t j1 = std::min(OC, j0 + kBlock);
      for (int64_t i = 0; i < N; ++i) {
        const T* row = dout + i * OC;
        for (int64_t j = j0; j < j1; ++j) dbias[j] += row[j];
      }
    }
  }
}

template void matvec_rows<float>(float*, const float*, const float*, int64_t, int64_t);
template void matvec_rows<double>(double*, const double*, const double*, int64_t, int64_t);
template void linear_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t, int64_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*, int64_t, int64_t, int64_t);

}  // namespace gpt::cpu
