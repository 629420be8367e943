#include "model/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace gpt {

int TokenSampler::next(const float* logits, int V, std::mt19937_64& rng) {
  if (p_.temperature == 0.f || p_.top_k == 1) return int(std::max_element(logits, logits + V) - logits);
  // Tokens below the k-th largest logit are out; ties at the threshold stay in
  // (as torch.topk's masking with `logits < v[-1]` keeps them).
  float threshold = -std::numeric_limits<float>::infinity();
  if (p_.top_k > 0 && p_.top_k < V) {
    kth_.assign(logits, logits + V);
    std::nth_element(kth_.begin(), kth_.begin() + (p_.top_k - 1), kth_.end(), std::greater<float>());
    threshold = kth_[size_t(p_.top_k - 1)];
  }
  const float mx = *std::max_element(logits, logits + V);
  // exp((l - max) / T): the softmax of logits / T, unnormalised. T = 1 divides
  // by one, exactly, so the defaults give the same numbers as before T existed.
  const double inv_t = 1.0 / double(p_.temperature);
  auto weight = [&](int j) { return logits[j] < threshold ? 0.0 : std::exp(double(logits[j] - mx) * inv_t); };
  double total = 0;
  for (int j = 0; j < V; ++j) total += weight(j);
  const double u = double(rng() >> 11) * 0x1p-53 * total;
  double acc = 0;
  int last_kept = V - 1;
  for (int j = 0; j < V; ++j) {
    const double w = weight(j);
    if (w == 0.0) continue;
    last_kept = j;
    acc += w;
    if (acc >= u) return j;
  }
  return last_kept;  // rounding left u above the last partial sum
}

}  // namespace gpt
