#include "model/cpu/gelu.hpp"

#include <cmath>

namespace gpt::cpu {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCoeff = 0.044715;
}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kCoeff);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + std::tanh(a * (x + c * x * x * x)));
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kCoeff);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T th = std::tanh(a * (x + c * x * x * x));
    const T sech2 = T(1) - th * th;
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * a * (T(1) + T(3) * c * x * x);
    dinp[i] = grad * dout[i];
  }
}

template void gelu_forward<float>(float*, const float*, int64_t);
template void gelu_forward<double>(double*, const double*, int64_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t);
template void gelu_backward<double>(double*, const double*, const double*, int64_t);

}  // namespace gpt::cpu
