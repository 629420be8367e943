// Single-process model state: every unit's parameters, gradients and AdamW
// moments held in full. For tools and tests that run without MPI (the
// PyTorch golden test, bench/train_throughput); training goes through a
// Strategy (strategy.hpp), whose ddp on one rank is this same layout.
// fp32 throughout on the CPU: params are their own master weights.
#pragma once

#include <vector>

#include "core/memory.hpp"
#include "model/adamw.hpp"
#include "model/layout.hpp"

namespace gpt {

class ReplicatedState {
 public:
  ReplicatedState(const ParamLayout& layout, uint64_t seed, MemoryTracker* tracker);

  // One pointer per unit, layout order; built once (no allocation per call).
  const std::vector<const float*>& params() const { return param_ptrs_; }
  const std::vector<float*>& grads() { return grad_ptrs_; }
  float* params(size_t unit) { return params_[unit].data(); }
  float* grads(size_t unit) { return grads_[unit].data(); }

  void zero_grads();
  double grad_norm() const;  // global L2 norm of all gradients
  void step(const AdamWHyper& h, const AdamWStep& s);

 private:
  const ParamLayout& layout_;
  std::vector<Buffer<float>> params_, grads_, m_, v_;
  std::vector<const float*> param_ptrs_;
  std::vector<float*> grad_ptrs_;
};

}  // namespace gpt
