#include "model/cpu/layernorm.hpp"

#include <algorithm>
#include <cmath>

namespace gpt::cpu {

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const T* x = inp + i * C;
    // Two passes (mean, then centred variance): no cancellation for large means.
    T m = 0;
    for (int64_t j = 0; j < C; ++j) m += x[j];
    m /= static_cast<T>(C);
    T v = 0;
    for (int64_t j = 0; j < C; ++j) v += (x[j] - m) * (x[j] - m);
    v /= static_cast<T>(C);
    const T s = T(1) / std::sqrt(v + static_cast<T>(kLayerNormEps));
    T* y = out + i * C;
    for (int64_t j = 0; j < C; ++j) y[j] = (x[j] - m) * s * w[j] + b[j];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const T* dy = dout + i * C;
    const T* x = inp + i * C;
    const T m = mean[i], s = rstd[i];
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int64_t j = 0; j < C; ++j) {
      const T dnorm = w[j] * dy[j];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * (x[j] - m) * s;
    }
    dnorm_mean /= static_cast<T>(C);
    dnorm_norm_mean /= static_cast<T>(C);
    T* dx = dinp + i * C;
    for (int64_t j = 0; j < C; ++j) {
      const T norm = (x[j] - m) * s;
      dx[j] += (w[j] * dy[j] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
  // Parameter gradients reduce over rows; split by columns so the summation
  // order (and so the result) does not depend on the thread count.
  constexpr int64_t kBlock = 32;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < C; j0 += kBlock) {
    const int64_t j1 = std::min(C, j0 + kBlock);
    for (int64_t i = 0; i < N; ++i) {
      const T* dy = dout + i * C;
      const T* x = inp + i * C;
      const T m = mean[i], s = rstd[i];
      for (int64_t j = j0; j < j1; ++j) {
        dw[j] += dy[j] * (x[j] - m) * s;
        db[j] += dy[j];
      }
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t, int64_t);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*, int64_t, int64_t);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*, const float*, int64_t, int64_t);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*, const double*, const double*, int64_t, int64_t);

}  // namespace gpt::cpu
