#include "strategies/model_state.hpp"

#include <cmath>

#include "model/init.hpp"

namespace gpt {

ReplicatedState::ReplicatedState(const ParamLayout& layout, uint64_t seed, MemoryTracker* tracker)
    : layout_(layout) {
  for (const UnitSpec& u : layout.units()) {
    params_.emplace_back(u.numel, MemCategory::kParams, tracker);
    grads_.emplace_back(u.numel, MemCategory::kGrads, tracker);
    m_.emplace_back(u.numel, MemCategory::kOptim, tracker);
    v_.emplace_back(u.numel, MemCategory::kOptim, tracker);
    init_unit(u, seed, params_.back().data());
    param_ptrs_.push_back(params_.back().data());
    grad_ptrs_.push_back(grads_.back().data());
  }
}

void ReplicatedState::zero_grads() {
  for (auto& g : grads_) g.fill(0.f);
}

double ReplicatedState::grad_norm() const {
  double s = 0;
  for (const auto& g : grads_) s += sum_squares(g.data(), static_cast<int64_t>(g.size()));
  return std::sqrt(s);
}

void ReplicatedState::step(const AdamWHyper& h, const AdamWStep& s) {
  for (size_t u = 0; u < params_.size(); ++u) {
    adamw_update(layout_.unit(u), 0, layout_.unit(u).numel, params_[u].data(), grads_[u].data(), m_[u].data(),
                 v_[u].data(), h, s);
  }
}

}  // namespace gpt
