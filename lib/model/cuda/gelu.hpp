// GELU, tanh approximation, on the device (contract: model/cpu/gelu.hpp).
// Used where the GEMM epilogue cannot fuse it (see matmul.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/cuda/types.hpp"

namespace gpt::cuda {

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t s);

// dinp = dout * gelu'(inp); dinp may alias dout.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t s);

}  // namespace gpt::cuda
