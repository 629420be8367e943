// LayerNorm over the last dimension (eps 1e-5, PyTorch's default).
#pragma once

#include <cstdint>

namespace gpt::cpu {

inline constexpr double kLayerNormEps = 1e-5;

// out[N, C] = (inp - mean) * rstd * w + b; saves mean[N] and rstd[N] for backward.
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int64_t N, int64_t C);

// dinp[N, C] += ...  (accumulates: the residual stream's gradient flows through
// unchanged and this adds the branch's contribution);  dw, db += ...
template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C);

}  // namespace gpt::cpu
