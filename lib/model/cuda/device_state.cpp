#include "model/cuda/device_state.hpp"

#include <cmath>
#include <type_traits>

#include "core/cuda/host_wait.hpp"
#include "model/cuda/adamw.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/elementwise.hpp"

namespace gpt::cuda {

template <typename T>
DeviceReplicatedState<T>::DeviceReplicatedState(const ParamLayout& layout,
                                                const std::vector<const float*>& host_params, DeviceAllocator* alloc,
                                                cudaStream_t stream)
    : layout_(layout), stream_(stream) {
  constexpr bool kMixed = !std::is_same_v<T, float>;
  for (size_t u = 0; u < layout.num_units(); ++u) {
    const size_t n = size_t(layout.unit(u).numel);
    master_.emplace_back(n, MemCategory::kParams, alloc);
    GPT_CUDA_OK(cudaMemcpy(master_.back().data(), host_params[u], n * 4, cudaMemcpyHostToDevice));
    if constexpr (kMixed) {
      compute_.emplace_back(n, MemCategory::kParams, alloc);
      convert(compute_.back().data(), master_.back().data(), int64_t(n), stream_);
      param_ptrs_.push_back(compute_.back().data());
    } else {
      param_ptrs_.push_back(master_.back().data());
    }
    grads_.emplace_back(n, MemCategory::kGrads, alloc);
    grad_ptrs_.push_back(grads_.back().data());
    grad_sizes_.push_back(int64_t(n));
    m_.emplace_back(n, MemCategory::kOptim, alloc);
    v_.emplace_back(n, MemCategory::kOptim, alloc);
  }
  norm_ = DeviceBuffer<double>(1, MemCategory::kScratch, alloc);
  scratch_ = DeviceBuffer<double>(size_t(sum_squares_scratch()), MemCategory::kScratch, alloc);
}

template <typename T>
void DeviceReplicatedState<T>::zero_grads() {
  for (auto& g : grads_) g.zero(stream_);
}

template <typename T>
double DeviceReplicatedState<T>::grad_norm() {
  norm_.zero(stream_);
  sum_squares<T>(grad_ptrs_.data(), grad_sizes_.data(), int(grad_ptrs_.size()), norm_.data(), scratch_.data(),
                 stream_);
  double sq = 0;
  GPT_CUDA_OK(cudaMemcpyAsync(&sq, norm_.data(), sizeof sq, cudaMemcpyDeviceToHost, stream_));
  wait_stream(stream_, "gradient norm");
  return std::sqrt(sq);
}

template <typename T>
void DeviceReplicatedState<T>::step(const AdamWHyper& h, const AdamWStep& s) {
  for (size_t u = 0; u < layout_.num_units(); ++u) {
    T* copy = nullptr;
    if constexpr (!std::is_same_v<T, float>) copy = compute_[u].data();
    adamw_update<T, T>(layout_.unit(u), 0, layout_.unit(u).numel, master_[u].data(), copy, grads_[u].data(),
                       m_[u].data(), v_[u].data(), h, s, stream_);
  }
}

template <typename T>
std::vector<float> DeviceReplicatedState<T>::master(size_t u) const {
  std::vector<float> out(master_[u].size());
  wait_stream(stream_, "master weights");
  GPT_CUDA_OK(cudaMemcpy(out.data(), master_[u].data(), out.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

template class DeviceReplicatedState<float>;
template class DeviceReplicatedState<bf16>;

}  // namespace gpt::cuda
