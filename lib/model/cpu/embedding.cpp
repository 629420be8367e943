#include "model/cpu/embedding.hpp"

#include <algorithm>

namespace gpt::cpu {

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn,
                       int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < B * Tn; ++n) {
    const T* te = wte + static_cast<int64_t>(tokens[n]) * C;
    const T* pe = wpe + (n % Tn) * C;
    T* o = out + n * C;
    for (int64_t j = 0; j < C; ++j) o[j] = te[j] + pe[j];
  }
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t B, int64_t Tn,
                        int64_t C) {
  constexpr int64_t kBlock = 32;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < C; j0 += kBlock) {
    const int64_t j1 = std::min(C, j0 + kBlock);
    for (int64_t n = 0; n < B * Tn; ++n) {
      const T* d = dout + n * C;
      T* te = dwte + static_cast<int64_t>(tokens[n]) * C;
      T* pe = dwpe + (n % Tn) * C;
      for (int64_t j = j0; j < j1; ++j) {
        te[j] += d[j];
        pe[j] += d[j];
      }
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, const float*, int64_t, int64_t, int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, const double*, int64_t, int64_t, int64_t);
template void embedding_backward<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t, int64_t);
template void embedding_backward<double>(double*, double*, const double*, const int32_t*, int64_t, int64_t, int64_t);

}  // namespace gpt::cpu
