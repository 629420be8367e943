#include "model/adamw.hpp"

#include <algorithm>
#include <cmath>

namespace gpt {

void adamw_update(const UnitSpec& unit, int64_t begin, int64_t end, float* p, const float* g, float* m, float* v,
                  const AdamWHyper& h, const AdamWStep& s) {
  const double bc1 = 1.0 - std::pow(double(h.beta1), double(s.t));
  const double bc2 = 1.0 - std::pow(double(h.beta2), double(s.t));
  const float step_size = static_cast<float>(s.lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  for (const TensorSpec& t : unit.tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    // Decoupled decay: p <- p (1 - lr wd) before the Adam step, as PyTorch does.
    const float decay = t.decay ? 1.f - s.lr * h.weight_decay : 1.f;
    const int64_t n = hi - lo, o = lo - begin;
    float *pp = p + o, *mm = m + o, *vv = v + o;
    const float* gg = g + o;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = gg[i] * s.grad_scale;
      mm[i] = h.beta1 * mm[i] + (1.f - h.beta1) * gi;
      vv[i] = h.beta2 * vv[i] + (1.f - h.beta2) * gi * gi;
      const float denom = std::sqrt(vv[i]) * inv_sqrt_bc2 + h.eps;
      pp[i] = pp[i] * decay - step_size * mm[i] / denom;
    }
  }
}

double sum_squares(const float* g, int64_t n) {
  // Fixed-size blocks summed in index order: same result for any thread count.
  constexpr int64_t kBlock = 1 << 14;
  const int64_t nb = (n + kBlock - 1) / kBlock;
  double total = 0;
#pragma omp parallel for ordered schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    double s = 0;
    const int64_t hi = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < hi; ++i) s += double(g[i]) * g[i];
#pragma omp ordered
    total += s;
  }
  return total;
}

float clip_scale(double global_norm, float max_norm) {
  if (max_norm <= 0.f || !(global_norm > max_norm)) return 1.f;
  return static_cast<float>(max_norm / (global_norm + 1e-6));
}

}  // namespace gpt
