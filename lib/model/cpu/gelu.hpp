// GELU, tanh approximation (GPT-2's "gelu_new"; PyTorch approximate="tanh").
#pragma once

#include <cstdint>

namespace gpt::cpu {

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n);

// dinp = dout * gelu'(inp). dinp may alias dout (in-place).
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n);

}  // namespace gpt::cpu
