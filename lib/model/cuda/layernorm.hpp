// LayerNorm on the device (contract: model/cpu/layernorm.hpp), statistics in
// fp32 whatever the storage type: mean[N] and rstd[N] are float. The
// residual adds around it are fused into the preceding GEMMs instead
// (Matmul::linear_residual_forward), which saves a full pass over [N, C].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/cuda/types.hpp"

namespace gpt::cuda {

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b, int64_t N, int64_t C,
                       cudaStream_t s);

// Floats of scratch layernorm_backward needs for width C.
int64_t layernorm_backward_scratch(int64_t C);

// dinp += ..., dw += ..., db += ... . Deterministic: every warp keeps its
// own partial dw/db row in `scratch`, summed in a fixed order afterwards.
template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, float* scratch, const T* dout, const T* inp, const T* w,
                        const float* mean, const float* rstd, int64_t N, int64_t C, cudaStream_t s);

}  // namespace gpt::cuda
