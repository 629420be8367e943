// Learning-rate schedule: linear warm-up from lr/warmup to lr over `warmup`
// steps, then cosine decay to min_lr at total_steps (constant afterwards).
#pragma once

namespace gpt {

struct LRSchedule {
  float lr = 6e-4f;
  float min_lr = 6e-5f;
  int warmup = 0;
  int total_steps = 1;
  // Learning rate of optimizer step `step` (0-based).
  float at(int step) const;
};

}  // namespace gpt
