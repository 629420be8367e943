// Drawing the next token from a row of logits, for the samples the trainer
// prints (--sample-temperature, --sample-top-k), as nanoGPT's sample.py does:
// logits / temperature, keep the top k, softmax, draw.
//   temperature 0: greedy (the first largest logit), no draw;
//   top_k 0: every token.
// With the defaults (temperature 1, top_k 0) the draw is the one the trainer
// always made: one 53-bit uniform from `rng`, the inverse of the cumulative
// softmax in token order, in double precision.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace gpt {

struct SamplingParams {
  float temperature = 1.0f;  // >= 0
  int top_k = 0;             // >= 0
};

class TokenSampler {
 public:
  explicit TokenSampler(SamplingParams p) : p_(p) {}
  // The next token among logits[0, V). Uses one draw from rng unless greedy.
  // Scratch is kept between calls: no allocation after the first call for a V.
  int next(const float* logits, int V, std::mt19937_64& rng);

 private:
  SamplingParams p_;
  std::vector<float> kth_;  // scratch for top-k's threshold
};

}  // namespace gpt
