#include "model/flops.hpp"

namespace gpt {

int64_t matmul_params(const GPTConfig& c) {
  const int64_t C = c.n_embd;
  return int64_t(c.n_layer) * 12 * C * C + int64_t(c.vocab_size) * C;
}

double train_flops_per_token(const GPTConfig& c, int seq_len) {
  return 6.0 * double(matmul_params(c)) + 12.0 * c.n_layer * double(c.n_embd) * seq_len;
}

}  // namespace gpt
