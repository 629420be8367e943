// Token + position embedding.
#pragma once

#include <cstdint>

namespace gpt::cpu {

// out[B*T, C] = wte[tokens[b, t]] + wpe[t].
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn,
                       int64_t C);

// dwte[tok] += dout, dwpe[t] += dout. Split by channel blocks, so rows that
// share a token are summed in a fixed order: deterministic for any thread count.
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t B, int64_t Tn,
                        int64_t C);

}  // namespace gpt::cpu
