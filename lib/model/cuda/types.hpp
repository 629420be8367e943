// Host-visible element types of the CUDA backend: float, and bf16 for
// --precision bf16 (stored as __nv_bfloat16, the layout of PyTorch's bfloat16).
#pragma once

#include <cuda_bf16.h>

namespace gpt::cuda {

using bf16 = __nv_bfloat16;

}  // namespace gpt::cuda
