// Single-GPU model state: every unit's parameters, gradients and AdamW
// state in full on the device (the device twin of strategies/model_state.hpp,
// for tests, benchmarks and one-rank runs).
//
// Mixed precision (T = bf16): fp32 master weights and moments; the bf16
// compute copy that forward/backward read is refreshed by every AdamW step;
// gradients are bf16. T = float: the master is the compute copy.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "core/cuda/device_memory.hpp"
#include "model/adamw.hpp"
#include "model/cuda/types.hpp"
#include "model/layout.hpp"

namespace gpt::cuda {

template <typename T>
class DeviceReplicatedState {
 public:
  // host_params: one full fp32 buffer per unit (layout order), e.g. from
  // init_unit or a checkpoint; copied to the device.
  DeviceReplicatedState(const ParamLayout& layout, const std::vector<const float*>& host_params,
                        DeviceAllocator* alloc, cudaStream_t stream);

  const std::vector<const T*>& params() const { return param_ptrs_; }
  const std::vector<T*>& grads() { return grad_ptrs_; }

  void zero_grads();
  double grad_norm();  // synchronises the stream (the clip scale is needed on the host)
  void step(const AdamWHyper& h, const AdamWStep& s);
  // fp32 master weights of unit u, to the host (checkpoints, tests).
  std::vector<float> master(size_t u) const;

 private:
  const ParamLayout& layout_;
  cudaStream_t stream_;
  std::vector<DeviceBuffer<float>> master_, m_, v_;
  std::vector<DeviceBuffer<T>> compute_, grads_;  // compute_ empty for T = float
  std::vector<const T*> param_ptrs_;
  std::vector<T*> grad_ptrs_;
  std::vector<int64_t> grad_sizes_;  // with grad_ptrs_, the norm's one launch
  DeviceBuffer<double> norm_, scratch_;
};

}  // namespace gpt::cuda
