// Token + position embedding on the device (contract: model/cpu/embedding.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "model/cuda/types.hpp"

namespace gpt::cuda {

// out[B*T, C] = wte[tokens[b, t]] + wpe[t]; tokens on the device.
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn,
                       int64_t C, cudaStream_t s);

// The rows of a micro-batch grouped by token, so dwte is a sum over each
// group in a fixed order: deterministic, with no atomics. Built on the host
// from the host copy of the tokens (the data loader's), uploaded with them.
// Packed layout (int32): [order: N] [starts: U + 1] [token: U], where order
// lists row indices sorted by token (stable), and group u is
// order[starts[u] .. starts[u+1]) with token id token[u].
// Built by a counting sort over the token ids, O(N + largest id), because
// it runs on the host between a step's loss read and its first kernel, while
// the GPU waits (bench_token_groups: 16K GPT-2 tokens, see README).
struct TokenGroups {
  std::vector<int32_t> packed;
  int32_t num_groups = 0;
  int64_t rows = 0;
  // Host tokens, each >= 0; reuses capacity (no allocation once the sizes repeat).
  void build(const int32_t* tokens, int64_t n);

 private:
  std::vector<int32_t> next_;  // per token id: its next row's slot in order
};

// dwte[tok] += sum of dout over the rows of that token; dwpe[t] += sum over b
// of dout[b, t]. groups: TokenGroups::packed copied to the device.
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* groups, int32_t num_groups, int64_t B,
                        int64_t Tn, int64_t C, cudaStream_t s);

}  // namespace gpt::cuda
