#include "model/flops.hpp"

namespace gpt {

int64_t matmul_params(const GPTConfig& c) {
  const int64_t C = c.n_embd;
  return int64_t(c.n_layer) * 12 * C * C + int64_t(c.vocab_size) * C;
}

StepFlops step_flops_per_token(const GPTConfig& c, int seq_len) {
  const double head_weights = double(c.vocab_size) * c.n_embd;
  const double forward = 2.0 * (double(matmul_params(c)) - head_weights) + 4.0 * c.n_layer * double(c.n_embd) * seq_len;
  return {forward, 6.0 * head_weights, 2.0 * forward};
}

double train_flops_per_token(const GPTConfig& c, int seq_len) {
  const StepFlops f = step_flops_per_token(c, seq_len);
  return f.blocks_forward + f.head + f.blocks_backward;
}

}  // namespace gpt

namespace gpt {

double gpu_peak_flops(const std::string& name, bool bf16) {
  // Most specific first: "H100 PCIe" must not match the SXM row.
  static const struct {
    const char* key;
    double bf16, fp32;
  } table[] = {{"H100 PCIe", 756e12, 51e12}, {"H100 NVL", 835e12, 60e12}, {"H200", 989e12, 67e12},
               {"H100", 989e12, 67e12},       {"A100", 312e12, 19.5e12},
               {"L40S", 362e12, 91.6e12},    {"A10", 125e12, 31.2e12},   {"V100", 125e12, 15.7e12}};
  for (const auto& row : table)
    if (name.find(row.key) != std::string::npos) return bf16 ? row.bf16 : row.fp32;
  return 0;
}

}  // namespace gpt
