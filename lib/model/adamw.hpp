// AdamW (decoupled weight decay, Loshchilov & Hutter; PyTorch's torch.optim.AdamW
// semantics) and the global gradient norm.
//
// The update works on any contiguous range of a unit, so a strategy that owns
// only a shard of a unit updates exactly that shard; the decay mask (2-D
// weights only) is taken from the layout's tensor boundaries inside the range.
#pragma once

#include <cstdint>

#include "model/layout.hpp"

namespace gpt {

struct AdamWHyper {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

struct AdamWStep {
  float lr = 0.f;
  int64_t t = 1;           // 1-based count of updates applied (skipped steps do not count), for bias correction
  float grad_scale = 1.f;  // multiplies every gradient first (global-norm clipping)
};

// Updates elements [begin, end) of `unit`. p, g, m, v point at element `begin`.
void adamw_update(const UnitSpec& unit, int64_t begin, int64_t end, float* p, const float* g, float* m, float* v,
                  const AdamWHyper& h, const AdamWStep& s);

// Sum of squares of g[0..n), accumulated in double (deterministic order).
double sum_squares(const float* g, int64_t n);

// Scale that clipping to max_norm applies given the global norm (1 if
// max_norm <= 0, i.e. clipping off, or the norm is already within bounds).
float clip_scale(double global_norm, float max_norm);

}  // namespace gpt
