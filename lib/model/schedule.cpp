#include "model/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gpt {

float LRSchedule::at(int step) const {
  if (step < warmup) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  const int decay_steps = std::max(1, total_steps - warmup);
  const double progress = std::min(1.0, double(step - warmup) / decay_steps);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return static_cast<float>(min_lr + coeff * (lr - min_lr));
}

}  // namespace gpt
