#include "model/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace gpt {

LRDecay parse_lr_decay(const std::string& name) {
  if (name == "cosine") return LRDecay::kCosine;
  if (name == "linear") return LRDecay::kLinear;
  if (name == "sqrt") return LRDecay::kSqrt;
  if (name == "constant") return LRDecay::kConstant;
  throw ConfigError(fmt::format("invalid lr-decay = '{}': expected cosine, linear, sqrt or constant", name));
}

const char* to_string(LRDecay d) {
  switch (d) {
    case LRDecay::kCosine: return "cosine";
    case LRDecay::kLinear: return "linear";
    case LRDecay::kSqrt: return "sqrt";
    case LRDecay::kConstant: return "constant";
  }
  return "?";
}

int LRSchedule::decay_start() const {
  const int after_warmup = std::max(1, total_steps - warmup);
  const int length = decay_steps > 0 ? decay_steps : static_cast<int>(std::lround(decay_ratio * after_warmup));
  return std::max(warmup, total_steps - std::clamp(length, 1, after_warmup));
}

float LRSchedule::at(int step) const {
  if (step < warmup) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  if (decay == LRDecay::kConstant) return lr;
  const int start = decay_start();
  if (step < start) return lr;
  // With ratio 1 this is warm-up + cosine over total_steps - warmup steps, as
  // before the ratio existed: the same learning rates, bit for bit.
  const double progress = std::min(1.0, double(step - start) / std::max(1, total_steps - start));
  double coeff = 0;
  switch (decay) {
    case LRDecay::kCosine: coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * progress)); break;
    case LRDecay::kLinear: coeff = 1.0 - progress; break;
    case LRDecay::kSqrt: coeff = 1.0 - std::sqrt(progress); break;
    case LRDecay::kConstant: coeff = 1.0; break;
  }
  return static_cast<float>(min_lr + coeff * (lr - min_lr));
}

namespace {
// "steps 7-20", or "step 20" for a span of one.
std::string steps(int first, int last) {
  return first == last ? fmt::format("step {}", last) : fmt::format("steps {}-{}", first, last);
}
}  // namespace

std::string LRSchedule::describe() const {
  // Logged step k is 0-based step k - 1. The decay's first step still has lr
  // (progress 0), so the LR is below lr from logged step decay_start() + 2.
  if (warmup >= total_steps)  // the run ends inside the warm-up: no stable phase, no decay
    return fmt::format("warm-up over {}; the run ends in it, at step {} with {:.3g} of {}", steps(1, warmup),
                       total_steps, at(total_steps - 1), lr);
  std::string out = warmup > 0 ? fmt::format("warm-up over {}, ", steps(1, warmup)) : "";
  if (decay == LRDecay::kConstant) return out + fmt::format("{} constant", lr);
  const int stable_end = std::min(decay_start() + 1, total_steps);
  if (stable_end <= warmup) return out + fmt::format("then {} decay towards {}", to_string(decay), min_lr);
  out += fmt::format("{} through step {}", lr, stable_end);
  if (stable_end == total_steps) return out;
  return out + fmt::format(", then {} decay over {} towards {}", to_string(decay), steps(stable_end + 1, total_steps),
                           min_lr);
}

}  // namespace gpt
