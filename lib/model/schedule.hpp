// Learning-rate schedule, in three phases over `total_steps` optimizer steps:
//   warm-up  steps [0, warmup): linear from lr/warmup to lr;
//   stable   steps [warmup, decay_start): lr;
//   decay    steps [decay_start, total_steps): from lr towards min_lr in the
//            shape `decay`, reaching min_lr at total_steps (and staying there
//            for any later step).
// The decay spans `decay_steps` steps when that is > 0, else `decay_ratio`
// of the steps after the warm-up (rounded, at least 1): ratio 1 is the classic warm-up + cosine (GPT-2, nanoGPT, llm.c); a
// smaller ratio is warmup-stable-decay (WSD), whose stable phase lets a run
// be extended, or its cool-down branched off, from any checkpoint before it.
// A fixed decay_steps keeps the cool-down's length when a run is extended
// (a ratio lengthens it with the run).
#pragma once

#include <string>

namespace gpt {

enum class LRDecay { kCosine, kLinear, kSqrt, kConstant };

// "cosine" | "linear" | "sqrt" | "constant"; throws ConfigError otherwise.
LRDecay parse_lr_decay(const std::string& name);
const char* to_string(LRDecay d);

struct LRSchedule {
  float lr = 6e-4f;
  float min_lr = 6e-5f;
  int warmup = 0;
  int total_steps = 1;
  LRDecay decay = LRDecay::kCosine;
  double decay_ratio = 1.0;  // in (0, 1]
  int decay_steps = 0;       // > 0: the decay's length (at most the steps after the warm-up); overrides decay_ratio
  // First step of the decay phase.
  int decay_start() const;
  // Learning rate of optimizer step `step` (0-based).
  float at(int step) const;
  // One line for the log, in the log's 1-based step numbers, e.g. "warm-up
  // over steps 1-10, 0.0006 through step 801, then linear decay over steps
  // 802-1000 towards 6e-05" (min_lr is the LR after the last step).
  std::string describe() const;
};

}  // namespace gpt
